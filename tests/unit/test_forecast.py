"""doctor --upgrade's decisions in-process: pip's report -> changes, the report diff, torch-minor drift,
the --upgrade argument split, the exit code, and the wording (tested once, here)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kernelcheck import schemas
from kernelcheck.cli.upgrade_args import forward_args, split_upgrade
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Finding, FunctionStatus, Status, Verdict
from kernelcheck.forecast import drift
from kernelcheck.forecast.command import Forecast, read_doctor
from kernelcheck.forecast.diff import diff
from kernelcheck.forecast.render import render_text, write_junit
from kernelcheck.forecast.resolve import Change, changes_from_report, pip_args
from kernelcheck.report.model import Report

_STATUS_OF = {"ready": "fast", "fallback": "fallback", "broken": "broken"}


def _report(verdict: str, code: int, functions=(), findings=()) -> Report:
    """A typed doctor report whose functions and findings decide `verdict` (a function `f0` with the matching
    status when none is given)."""
    fns = [FunctionStatus(f["name"], "pkg", f["status"], f.get("implementation", "torch")) for f in functions] or \
        [FunctionStatus("f0", "pkg", _STATUS_OF[verdict], "torch")]
    rep = Report("doctor", None, None, "train", fns, [Finding(**f) for f in findings])
    assert (rep.verdict, rep.exit_code) == (verdict, code)
    return rep


PIP_REPORT = {"install": [
    {"metadata": {"name": "transformers", "version": "5.25.0"}},
    {"metadata": {"name": "Kernels", "version": "0.19.1"}},
    {"metadata": {"name": "huggingface_hub", "version": "2.4.0"}},   # already there: not a change
    {"metadata": {"name": "tomlkit", "version": "0.15.3"}},          # new
]}


def test_pip_report_gives_the_distributions_whose_version_changes():
    installed = {"transformers": "5.24.0", "kernels": "0.18.3", "huggingface-hub": "2.4.0"}
    got = changes_from_report(PIP_REPORT, installed)
    assert [(c.name, c.before, c.after) for c in got] == [
        ("kernels", "0.18.3", "0.19.1"), ("tomlkit", None, "0.15.3"), ("transformers", "5.24.0", "5.25.0")]
    assert got[0].spec == "kernels==0.19.1"


def test_upgrade_values_run_to_the_next_doctor_option():
    args, specs = split_upgrade(["--model", "m", "--upgrade", "transformers==5.25.0", "kernels==0.19.1",
                                 "--mode", "infer"])
    assert specs == ["transformers==5.25.0", "kernels==0.19.1"]
    assert args == ["--model", "m", "--upgrade", "--mode", "infer"]
    _, specs = split_upgrade(["--upgrade", "-r", "req.txt", "-c", "c.txt", "--json"])
    assert specs == ["-r", "req.txt", "-c", "c.txt"]
    assert split_upgrade(["--model", "m"]) == (["--model", "m"], None)


def test_pip_args_refuse_a_missing_requirements_file_and_foreign_options(tmp_path: Path):
    req = tmp_path / "r.txt"
    req.write_text("transformers==5.25.0\n")
    assert pip_args(["-r", str(req), "kernels==0.19.1"]) == ["-r", str(req), "kernels==0.19.1"]
    for bad in (["-r", str(tmp_path / "nope.txt")], ["--index-url", "x"], [], ["-r"]):
        with pytest.raises(BadInput):
            pip_args(bad)


def test_forward_args_keep_doctors_own_options_only():
    got = forward_args({"model": "qwen3.8-27b", "mode": "train", "arch": "9.0", "exact": True, "hub": False,
                        "as_json": True, "junit": "x.xml"})
    assert got == ["--model", "qwen3.8-27b", "--mode", "train", "--arch", "9.0", "--exact", "--no-hub"]


def test_diff_names_changed_functions_and_findings_and_the_trend():
    before = _report("fallback", 3, [{"name": "chunk_gated_delta_rule", "status": "fast", "implementation": "fla"},
                                     {"name": "causal_conv1d_fn", "status": "fallback", "implementation": "torch"}],
                     [{"id": "kernels-window", "severity": "warning", "message": "m"}])
    after = _report("broken", 4, [{"name": "chunk_gated_delta_rule", "status": "broken", "implementation": "fla"},
                                  {"name": "causal_conv1d_fn", "status": "fallback", "implementation": "torch"}],
                    [{"id": "hub-offline-uncached", "severity": "broken", "message": "m", "fix": "f"}])
    d = diff(before, after)
    assert [(f.name, f.before_status, f.after_status) for f in d.functions] == [
        ("chunk_gated_delta_rule", "fast", "broken")]
    assert d.findings_added == ["hub-offline-uncached"] and d.findings_removed == ["kernels-window"]
    assert d.worse and not d.better and d.exit_after == 4


def _forecast(before, after, if_worse=False, drifts=()):
    return Forecast(["transformers==5.25.0"], [Change("transformers", "5.24.0", "5.25.0")], before, after,
                    diff(before, after), list(drifts), if_worse)


def test_exit_code_is_the_after_verdicts_and_if_worse_passes_what_is_not_worse():
    same = _forecast(_report("fallback", 3), _report("fallback", 3))
    assert same.exit_code == 3
    assert _forecast(_report("fallback", 3), _report("fallback", 3), if_worse=True).exit_code == 0
    assert _forecast(_report("ready", 0), _report("broken", 4), if_worse=True).exit_code == 4
    assert _forecast(_report("broken", 4), _report("ready", 0), if_worse=True).exit_code == 0
    js = same.to_json()
    assert js["schema"] == "kernelcheck.forecast/1" and js["before"]["verdict"] == "fallback"
    assert js["diff"]["worse"] is False and js["changes"][0]["after"] == "5.25.0"
    jsonschema.validate(js, schemas.load("forecast"))
    with pytest.raises(jsonschema.ValidationError):  # the schema can fail: a verdict word it does not know
        jsonschema.validate({**js, "verdict": "excellent"}, schemas.load("forecast"))


def _ext(version="1.7.0+cu13torch2.11cxx11abitrue", mm=None):
    return drift.Extension("causal-conv1d", version, (), mm)


def test_torch_minor_change_orphans_compiled_packages_built_for_the_old_minor():
    got = drift.judge([_ext()], "2.11.0+cu130", "2.12.0+cu130", "5.25.0")
    assert [(d.distribution, d.built_for, d.evidence, d.outcome) for d in got] == [
        ("causal-conv1d", "2.11", "version-tag", "silent-fallback")]
    assert "kernelcheck install --model M --package causal-conv1d" in got[0].fix
    assert drift.judge([_ext()], "2.11.0", "2.11.1", "5.25.0") == []          # same minor: nothing
    assert drift.judge([_ext(mm="2.12")], "2.11.0", "2.12.0", "5.25.0") == []  # manifest says built for new
    assert drift.judge([_ext("1.7.0")], "2.11.0", "2.12.0", "5.14.1", {"causal-conv1d": 0}) == []
    sym = drift.judge([_ext("1.7.0")], "2.11.0", "2.12.0", "5.14.1", {"causal-conv1d": 12})
    assert sym[0].evidence == "symbols" and sym[0].missing_symbols == 12 and sym[0].outcome == "import-error"


def test_render_text_and_junit(tmp_path: Path):
    before = _report("fallback", 3, [{"name": "chunk_gated_delta_rule", "status": "fallback"}])
    after = _report("broken", 4, [{"name": "chunk_gated_delta_rule", "status": "broken"}],
                    [{"id": "hub-offline-uncached", "severity": "broken", "message": "no cached build",
                      "fix": "kernelcheck hub --prefetch"}])
    fc = _forecast(before, after, drifts=drift.judge([_ext()], "2.11.0", "2.12.0", "5.25.0"))
    text = render_text(fc)
    assert "pip would change: transformers 5.24.0 -> 5.25.0" in text  # wording: renderer test
    assert "before: FALLBACK (exit 3)   after: BROKEN (exit 4)   (worse)" in text  # wording: renderer test
    assert "chunk_gated_delta_rule: fallback -> broken" in text  # wording: renderer test
    assert "new finding [broken] hub-offline-uncached: no cached build" in text  # wording: renderer test
    drifted = "torch drift: causal-conv1d 1.7.0+cu13torch2.11cxx11abitrue is built for torch 2.11"
    assert drifted in text  # wording: renderer test
    assert text.splitlines()[-1] == "verdict after the upgrade: BROKEN"
    out = tmp_path / "f.xml"
    write_junit(fc, str(out))
    xml = out.read_text()
    assert 'failures="3"' in xml and 'name="chunk_gated_delta_rule"' in xml


def test_junit_ranks_a_status_as_the_verdict_does_unsupported_is_a_fallback(tmp_path: Path):
    """fast -> unsupported makes the verdict worse (exit 0 -> 3), so its case fails; unsupported -> fallback not."""
    import xml.etree.ElementTree as ET

    before = _report("broken", 4, [{"name": "a", "status": "fast"}, {"name": "b", "status": "unsupported"},
                                  {"name": "c", "status": "broken"}])
    after = _report("broken", 4, [{"name": "a", "status": "unsupported"}, {"name": "b", "status": "fallback"},
                                  {"name": "c", "status": "fast"}, {"name": "d", "status": "broken"}])
    out = tmp_path / "f.xml"
    write_junit(_forecast(before, after), str(out))
    failed = {c.get("name") for c in ET.parse(out).getroot().iter("testcase")
              if c.get("classname") == "forecast.functions" and c.find("failure") is not None}
    assert failed == {"a", "d"}


REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"


@pytest.mark.parametrize("name", ["doctor_train.json", "doctor_infer.json"])
def test_doctors_stdout_is_read_once_typed_and_printed_back_as_it_was(name: str):
    printed = (REPORTS / name).read_text()
    report = read_doctor(printed)
    assert isinstance(report, Report) and report.command == "doctor"
    fc = _forecast(report, report)
    js = fc.to_json()
    assert js["before"] == js["after"] == json.loads(printed)  # the doctor JSON, unchanged, in the forecast
    assert js["verdict"] == json.loads(printed)["verdict"] and fc.diff.functions == []
    assert fc.diff.verdict_after is Verdict(report.verdict)


@pytest.mark.parametrize("stdout", [
    "", "not json", "[1, 2]", '{"functions": []}',
    json.dumps({"schema": schemas.ERROR, "command": "doctor", "verdict": None, "exit_code": 2, "error": "bad --model"}),
    json.dumps({"schema": "kernelcheck.doctor/1", "command": "doctor", "verdict": "ready", "exit_code": 0}),
])
def test_a_doctor_stdout_without_a_report_reads_as_none(stdout: str):
    """No JSON, an error record (no verdict) or a report that does not read back: the forecast says doctor gave no
    report (command._doctor raises with its exit code), never a verdict of None."""
    assert read_doctor(stdout) is None


def test_the_diff_holds_statuses_and_verdicts_as_values():
    before = _report("fallback", 3, [{"name": "a", "status": "fallback"}])
    after = _report("ready", 0, [{"name": "a", "status": "fast", "implementation": "fla"},
                                 {"name": "b", "status": "fast"}])
    d = diff(before, after)
    assert (d.verdict_before, d.verdict_after, d.better) == (Verdict.FALLBACK, Verdict.READY, True)
    assert [(f.name, f.before_status, f.after_status, f.after_implementation) for f in d.functions] == [
        ("a", Status.FALLBACK, Status.FAST, "fla"), ("b", None, Status.FAST, "torch")]


def test_every_hub_failure_the_upgrade_brings_is_shown_and_counted_once_per_occurrence():
    """Both repositories the Hub fails for after the upgrade (fla and mamba-ssm): the text showed only the last one
    (findings keyed by id) and diff.findings_added listed the id once."""
    fla = {"id": "hub-not-listable", "severity": "broken", "message": "kernels-community/fla@v3: not listed"}
    ssm = {"id": "hub-not-listable", "severity": "broken", "message": "kernels-community/mamba-ssm@v5: not listed"}
    two = _forecast(_report("fallback", 3), _report("broken", 4, findings=[fla, ssm]))
    assert two.diff.findings_added == ["hub-not-listable", "hub-not-listable"]
    text = render_text(two)
    assert "kernels-community/fla@v3: not listed" in text and "kernels-community/mamba-ssm@v5: not listed" in text
    one_more = _forecast(_report("broken", 4, findings=[ssm]), _report("broken", 4, findings=[fla, ssm]))
    assert one_more.diff.findings_added == ["hub-not-listable"] and one_more.diff.findings_removed == []
    assert "fla@v3" in render_text(one_more) and "mamba-ssm" not in render_text(one_more)
