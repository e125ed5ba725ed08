"""More cases of scripts/fault_battery.py: the job's own code run by kernelcheck (a --collator that exits, raises a
BaseException or never returns), settings values checked at start, a damaged Hugging Face cache, NaN in a trace,
and the other hostile inputs and faults found by the fourth hostile round. `inproc()` are run through the CLI's main
in the battery's process, `processes()` as `python -m kernelcheck` (fields as fault_battery.Case)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fault_cases_env import InCase

MODEL = "qwen3.8-27b"
COLLATOR = '''
import os, sys, time
def ex0(f): sys.exit(0)
def osexit(f): os._exit(0)
'''


@dataclass
class ProcCase:
    name: str
    make: Callable[[Path], list[str]]
    code: int
    words: str = ""
    shell: bool = False
    sites: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    read_only: str = ""


def _collator(fn: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        (d / "job_collate.py").write_text(COLLATOR)
        (d / "lens.txt").write_text("30\n50\n20\n")
        return ["verify", "--model", MODEL, "--packing", "--collator", f"job_collate:{fn}", "--lengths",
                str(d / "lens.txt")]
    return make


SETTINGS = {"KERNELCHECK_NETWORK_TIMEOUT": "nan", "KERNELCHECK_IMPORT_TIMEOUT": "abc",
            "KERNELCHECK_IMPORT_CACHE": "maybe", "KERNELCHECK_PROGRESS": "quiet",
            "KERNELCHECK_STEP_PROFILED": "1000000000", "KERNELCHECK_DEBUG": "please"}


def inproc() -> list[InCase]:
    out = [InCase(f"settings {k}={v} / models", lambda d, k=k, v=v: (["models"], {k: v}, []), (2,), k)
           for k, v in SETTINGS.items()]
    return out


def processes() -> list[ProcCase]:
    """The collator cases run with the folder as the working directory (sites: the module is found there)."""
    return [ProcCase(f"verify --collator {fn}", _collator(fn), 2, words, sites=("{d}",))
            for fn, words in (("ex0", "sys.exit(0)"), ("osexit", "without returning a batch"))]  # the rest: 16 s
    # each as a process; tests/integration/test_hostile_collator.py has every exit through the child alone

