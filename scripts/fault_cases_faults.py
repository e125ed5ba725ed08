"""More cases of scripts/fault_battery.py: the job's own code run by kernelcheck (a --collator that exits, raises a
BaseException or never returns), settings values checked at start, a damaged Hugging Face cache, NaN in a trace,
and the other hostile inputs and faults found by the fourth hostile round. `inproc()` are run through the CLI's main
in the battery's process, `processes()` as `python -m kernelcheck` (fields as fault_battery.Case)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fault_cases_env import InCase, Made

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


def _hub_cache(damage: str) -> Callable[[Path], Made]:
    """kernels-community/fla@v2 in a Hugging Face cache of its own, one file of it damaged."""
    def make(d: Path) -> Made:
        import os

        from tests.kernel_repos import cache_repo

        commit = cache_repo(d / "hf", "kernels-community/fla", ["torch211-cxx11-cu130-x86_64-linux"], versions=(2,))
        base = d / "hf" / "kernels--kernels-community--fla"
        (base / "trees").mkdir()
        {"ref binary": lambda: (base / "refs" / "v2").write_bytes(os.urandom(64)),
         "ref 5 MB": lambda: (base / "refs" / "v2").write_bytes(b"a" * 5_000_000),
         "tree nested": lambda: (base / "trees" / f"{commit}.json").write_text("[" * 100_000 + "]" * 100_000),
         "tree list": lambda: (base / "trees" / f"{commit}.json").write_text("[1, 2]"),
         "tree files 5": lambda: (base / "trees" / f"{commit}.json").write_text('{"files": 5}')}[damage]()
        return (["hub", "--repo", "kernels-community/fla@v2", "--device", "cuda"],
                {"HF_HUB_CACHE": str(d / "hf"), "HF_HUB_OFFLINE": "1"}, [])
    return make


def _nan_trace(value: str) -> Callable[[Path], Made]:
    def make(d: Path) -> Made:
        evs = ",".join(f'{{"ph": "X", "cat": "kernel", "name": "k", "ts": {i * 10}, "dur": {value}, "pid": 0, '
                       f'"tid": 7, "args": {{"device": 0}}}}' for i in range(20))
        (d / "t.json").write_text('{"traceEvents": [' + evs + "]}")
        return ["trace", str(d / "t.json"), "--json"], {}, []
    return make


def _nested_matrix(name: str, args: list[str]) -> Callable[[Path], Made]:
    def make(d: Path) -> Made:
        import shutil

        from fault_cases_env import MATRIX

        shutil.copytree(MATRIX, d / "m", ignore=shutil.ignore_patterns("__pycache__"))
        with open(d / "m" / name, "a", encoding="utf-8") as fh:
            fh.write("\nnested = " + "[" * 100_000 + "]" * 100_000 + "\n")
        return args, {"KERNELCHECK_MATRIX_DIR": str(d / "m")}, []
    return make


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def inproc() -> list[InCase]:
    out = [InCase(f"settings {k}={v} / models", lambda d, k=k, v=v: (["models"], {k: v}, []), (2,), k)
           for k, v in SETTINGS.items()]
    out += [InCase(f"hub cache {what} / hub --repo", _hub_cache(what), (3, 4), "damaged cache entry")
            for what in ("ref binary", "ref 5 MB", "tree nested", "tree list", "tree files 5")]
    out += [InCase(f"matrix {n} nested 100k deep / models", _nested_matrix(n, ["models"]), (2,), "nested too deeply")
            for n in ("models.toml", "data.toml")]
    out.append(InCase("matrix data.toml nested / --version", _nested_matrix("data.toml", ["--version"]), (0,),
                      "kernelcheck "))
    verify = ["verify", "--model", MODEL, "--packing"]
    out += [InCase("verify --packing --batch ''", lambda d: ([*verify, "--batch", ""], {}, []), (2,), "empty"),
            InCase("verify --packing --batch --junit", lambda d: ([*verify, "--batch", "b.pt", "--junit",
                                                                   str(d / "r.xml")], {}, []), (2,), "--junit")]
    for n in ("1000000000", "1000000000000"):
        out.append(InCase(f"verify --packing --benchmark --lengths {n}", lambda d, n=n: (
            [*verify, "--benchmark", "--lengths", _write(d / "l.txt", n + "\n")], {}, []), (2,), "tokens"))
    out.append(InCase("verify --packing --lengths 2,000 segments", lambda d: (
        [*verify, "--collator", "transformers:DataCollatorWithFlattening", "--lengths",
         _write(d / "l.txt", "2\n" * 2000)], {}, []), (2,), "2,000 segments"))
    out += [InCase(f"trace kernel dur {v}", _nan_trace(v), (2,), "NaN or Infinity") for v in ("NaN", "Infinity")]
    return out


def processes() -> list[ProcCase]:
    """The collator cases run with the folder as the working directory (sites: the module is found there)."""
    return [ProcCase(f"verify --collator {fn}", _collator(fn), 2, words, sites=("{d}",))
            for fn, words in (("ex0", "sys.exit(0)"), ("osexit", "without returning a batch"))]  # the rest: 16 s
    # each as a process; tests/integration/test_hostile_collator.py has every exit through the child alone

