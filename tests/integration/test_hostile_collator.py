"""The job's --collator code cannot decide kernelcheck's exit code (packing/batchfile.py collate runs it in a
child process of its own, bounded in time): sys.exit(0) in the collator or its module's import, os._exit(0),
sys.exit(3), sys.exit("msg"), a BaseException and a collator that never returns are each bad input (exit 2) naming
what the code did, never exit 0 with no report, 3 with none, or 1 with a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core.errors import BadInput
from kernelcheck.packing import batchfile

pytestmark = pytest.mark.integration

JOB = '''
import os, sys, time
def ex0(f): sys.exit(0)
def ex3(f): sys.exit(3)
def exmsg(f): sys.exit("msg")
def osexit(f): os._exit(0)
class Stop(BaseException): pass
def base(f): raise Stop("no")
def hang(f): time.sleep(1000)
def good(f):
    from transformers import DataCollatorWithFlattening
    return DataCollatorWithFlattening()(f)
'''


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "job_collate.py").write_text(JOB)
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\ndef f(x): return x\n")
    (tmp_path / "lens.txt").write_text("30\n50\n20\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("spec,words", [("job_collate:ex0", "sys.exit(0)"), ("exits_on_import:f", "sys.exit(0)"),
                                        ("job_collate:ex3", "sys.exit(3)"), ("job_collate:exmsg", "sys.exit('msg')"),
                                        ("job_collate:osexit", "exit code 0"), ("job_collate:base", "Stop: no")])
def test_the_jobs_exit_is_bad_input_naming_it(job: Path, spec: str, words: str) -> None:
    with pytest.raises(BadInput) as got:
        batchfile.collate(spec, [30, 50, 20], vocab=64)
    assert words in got.value.message  # wording: the message names what the code did


def test_a_collator_calling_sys_exit_0_fails_the_gate(job: Path) -> None:
    """Before: exit 0 and no output, a gate passed having checked nothing."""
    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--packing", "--collator", "job_collate:ex0",
                                    "--lengths", str(job / "lens.txt"), "--json"])
    assert res.exit_code == 2 and '"exit_code": 2' in res.output, res.output


def test_a_collator_that_never_returns_is_stopped_and_named(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batchfile, "COLLATOR_LIMIT_S", 5.0)
    t = time.monotonic()
    with pytest.raises(BadInput) as got:
        batchfile.collate("job_collate:hang", [3, 4], vocab=64)
    assert time.monotonic() - t < 30 and "did not return within 5 s" in got.value.message


def test_a_working_collator_still_builds_the_batch(job: Path) -> None:
    from kernelcheck.packing import lint

    got = batchfile.collate("transformers:DataCollatorWithFlattening", [3, 2, 4], vocab=128)
    assert lint.segments(got.view)[0] == ((0, 3), (3, 5), (5, 9)) and got.view.tokens == 9
    for spec, words in (("no_such_module_x:f", "cannot import"), ("transformers:__version__", "not callable")):
        with pytest.raises(BadInput, match=words):
            batchfile.collate(spec, [3], vocab=128)
