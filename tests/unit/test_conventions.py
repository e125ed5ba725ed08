"""One set of conventions for every command: --color and --no-progress anywhere, -o on every command that has a
report, one verdict vocabulary (READY / FALLBACK / BROKEN), a status word a user reads right, and model names in
shell completion. In-process: click's runner and the renderers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core.status import Finding, FunctionStatus, Severity, Status
from kernelcheck.report import progress
from kernelcheck.report.model import Report
from kernelcheck.report.text import render_text

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "tests" / "data" / "reports"


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    from kernelcheck.report import terminal

    monkeypatch.setitem(terminal._COLOR, "choice", "auto")
    monkeypatch.setenv("KERNELCHECK_PROGRESS", "1")


def test_color_is_accepted_after_the_subcommand_and_colours_the_verdict_words():
    res = CliRunner().invoke(main, ["compare", str(REPORTS / "doctor_train.json"), "--color", "always"])
    assert res.exit_code in (0, 3), res.output
    assert "\x1b[" in res.output  # wording: renderer test (colour codes)
    res = CliRunner().invoke(main, ["compare", str(REPORTS / "doctor_train.json"), "--color", "never"])
    assert "\x1b[" not in res.output  # wording: renderer test (colour codes)


def test_no_progress_turns_progress_off_as_kernelcheck_progress_0():
    assert progress.enabled()
    res = CliRunner().invoke(main, ["models", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert os.environ["KERNELCHECK_PROGRESS"] == "0" and not progress.enabled()


def test_models_and_padding_write_their_json_with_o(tmp_path):
    out = tmp_path / "models.json"
    res = CliRunner().invoke(main, ["models", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["command"] == "models"
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("5\n10\n300\n")
    out = tmp_path / "padding.json"
    res = CliRunner().invoke(main, ["padding", str(lengths), "--batching", "batch:2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["command"] == "padding" and data["verdict"] == "ready"


def test_trace_speaks_the_verdict_vocabulary_in_text_json_and_library():
    import kernelcheck
    from kernelcheck.core import matrix
    from kernelcheck.trace import analysis
    from kernelcheck.trace.render import render_text as render_trace

    fast = REPO / "tests" / "data" / "gpu" / "gdn_fast.json.gz"
    a = kernelcheck.analyze_trace(fast)
    assert a.verdict == "ready" and a.diagnosis == "healthy"
    rep = analysis.trace_report(str(fast), m=matrix.load())
    assert rep.verdict == "ready" and rep.trace is not None and rep.trace.trace.diagnosis == "healthy"
    verdict_line = render_trace(rep).splitlines()[-1]
    assert verdict_line.startswith("verdict: READY")  # wording: renderer test
    assert "HEALTHY" not in render_trace(rep)  # wording: renderer test
    slow = kernelcheck.analyze_trace(REPO / "tests" / "data" / "gpu" / "gdn_fallback.json.gz")
    assert slow.verdict == "fallback" and slow.diagnosis == "fallback"


def test_doctor_without_a_model_says_nothing_was_checked_not_that_a_slow_path_would_run():
    rep = Report("doctor", None, None, None, findings=[Finding("no-model", Severity.FALLBACK, "no model")])
    assert rep.exit_code == 3  # a gate never passes when nothing was checked
    line = render_text(rep).splitlines()[-1]
    assert "no kernel was checked" in line and "slow torch path would run" not in line  # wording: renderer test


def test_a_function_that_does_not_apply_here_reads_n_a_not_unsupported():
    fn = FunctionStatus("causal_conv1d_update", "causal-conv1d", Status.UNSUPPORTED, "not called", used=False)
    rep = Report("doctor", None, None, "train", functions=[fn])
    text = render_text(rep)
    assert "  N/A " in text and "UNSUPPORTED" not in text  # wording: renderer test
    assert json.loads(__import__("kernelcheck.report.model", fromlist=["render_json"]).render_json(rep))[
        "functions"][0]["status"] == "unsupported"  # JSON unchanged


def test_model_names_complete_from_the_alias_table():
    comp = ShellComplete(main, {}, "kernelcheck", "_KERNELCHECK_COMPLETE")
    for command in ("doctor", "verify", "install", "hub"):
        names = [c.value for c in comp.get_completions([command, "--model"], "qw")]
        assert "qwen3.8-27b" in names and all(n.lower().startswith("qw") for n in names), (command, names)
