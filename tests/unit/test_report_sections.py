"""The typed report sections (report/model.py) give the JSON keys, order and values the commands always printed."""

from __future__ import annotations

import json

from kernelcheck.core.plan_step import Step, StepKind
from kernelcheck.report.hub import HubTransformers, PrintedLine, UseLine
from kernelcheck.report.live_details import LiveDetails, LiveModel, NotCompared, Timing, TritonCacheState
from kernelcheck.report.model import (
    Before,
    Bindings,
    HubSection,
    Installed,
    LiveSection,
    Needs,
    Prediction,
    Report,
    TraceSection,
    render_json,
)
from kernelcheck.report.sections import ModeOutcome, PackingSection
from kernelcheck.report.text import render_text
from tests.environments import model_ref

TRANSFORMERS = HubTransformers("5.24.0", None, None, "-", False, "YES", False, True, False, "-", True, "-")
HEAD = ["schema", "command", "verdict", "exit_code", "environment", "model", "mode", "functions", "findings"]


def hub(used: bool = False) -> HubSection:
    return HubSection([UseLine(used, "use_kernels is off")], used, "use_kernels is off", "cpu", "train", True,
                      TRANSFORMERS, [], [], [])


def test_doctor_sections_follow_the_findings_in_order():
    r = Report("doctor", None, model_ref("qwen3.5-27b"), "train")
    r.needs = Needs(["chunk_gated_delta_rule"], ["fla"], "sdpa")
    r.bindings = Bindings("decorator", "transformers.models.qwen3_5.modeling_qwen3_5")
    r.hub = hub()
    model = LiveModel("qwen3_5_text", "Qwen3_5ForCausalLM", "tiny", ["linear_attention"], "cpu", "float32", 10, {},
                      "sdpa")
    details = LiveDetails("cpu", "float32", "tiny", 128, model, [], [], {}, NotCompared(), None,
                          TritonCacheState("/c", 0, 0, 0, False), Timing(0.5, 0.1, 0.2, None, None, None, 1.0, 0.5))
    r.live = LiveSection(ran=True, details=details, items=[PrintedLine("built")], captured_output=None)
    r.packing = PackingSection(None, True, {"chunk_gated_delta_rule": False},
                               (ModeOutcome("none", "correct", "one sequence per row", None),), True, "ref")
    data = json.loads(render_json(r))
    assert list(data) == [*HEAD, "needs", "bindings", "hub", "live", "packing"]
    assert data["needs"] == {"functions": ["chunk_gated_delta_rule"], "packages": ["fla"],
                             "attn_implementation": "sdpa"}
    assert data["bindings"] == {"regime": "decorator", "module": "transformers.models.qwen3_5.modeling_qwen3_5"}
    assert list(data["hub"]) == ["lines", "used", "why", "device", "mode", "offline", "transformers", "mapping",
                                 "names", "repos"]
    assert list(data["live"]) == ["ran", "device", "dtype", "shape", "tokens", "model", "fast_functions",
                                  "forced_torch_after_failure", "steps", "reference_comparison", "benchmark",
                                  "triton_cache", "timing", "lines", "captured_output"]
    assert data["live"]["model"]["class"] == "Qwen3_5ForCausalLM" and data["live"]["reference_comparison"] == {}
    text = render_text(r)
    assert "hub: Hub kernels are not used: use_kernels is off." in text \
        and "live (verify)\n  built" in text  # wording: renderer test


def test_live_section_variants():
    assert LiveSection(ran=False, items=[PrintedLine("not run")]).to_json() == {"ran": False, "lines": ["not run"]}
    assert list(LiveSection(ran=True, items=[PrintedLine("x")], step=True).to_json()) == ["ran", "step", "lines"]


def test_install_sections():
    r = Report("install", None, None, "train")
    r.before = Before("fallback", {"chunk_gated_delta_rule": "fallback"})
    r.plan = [Step("fla-core", "install", "pypi", "fla-core==0.4", "r", kind=StepKind.NEWEST_COMPATIBLE)]
    r.prediction = Prediction("ready", False)
    assert list(json.loads(render_json(r))) == [*HEAD, "before", "plan", "predicted", "executed"]
    assert list(json.loads(render_json(r))["plan"][0]) == ["package", "action", "source", "spec", "reason", "command",
                                                          "rejected", "artifact", "sha256", "arches", "import_name",
                                                          "severity", "kind"]
    r.prediction = Prediction("ready", True, None, has_lock=True)
    assert json.loads(render_json(r))["lock"] is None
    r.prediction = None
    r.installed = Installed([], None, 1.5, None, has_doctor_after=True)
    data = json.loads(render_json(r))
    assert list(data)[len(HEAD):] == ["before", "plan", "installed", "manifest", "install_seconds", "doctor_after"]
    assert data["doctor_after"] is None and data["install_seconds"] == 1.5


def test_trace_sections_and_annotation():
    import dataclasses

    from kernelcheck.report.trace import Annotated, IdleGaps, LaunchDelay, StepRow, TraceFile

    row = StepRow("s1", 1, 0, 0, 0, 0, 0.0, 1.0, 0.0, 1.0, None, IdleGaps(0, 0.0, 0.0), LaunchDelay(0.0, 0.0, 0.0, 0),
                  0.0, [], [], [], 0)
    file = TraceFile("t.json", 10, False, 3, True, [], None, "healthy", [], [], [], [])
    r = Report("trace", None, None, None)
    r.trace = TraceSection(file, dataclasses.replace(row, name="trace"), [row])
    assert list(json.loads(render_json(r))) == [*HEAD, "trace", "summary", "steps"]
    r.trace = TraceSection(dataclasses.replace(file, annotated=Annotated("out.json", 2)), row, [row], {})
    assert list(json.loads(render_json(r)))[len(HEAD):] == ["trace", "summary", "steps"]  # an empty breakdown: no key
    r.trace = dataclasses.replace(r.trace, breakdown={"phases": {"forward": {}}})
    data = json.loads(render_json(r))
    assert list(data)[len(HEAD):] == ["trace", "summary", "steps", "breakdown"]
    assert list(data["trace"])[-2:] == ["fallback_signatures", "annotated"]
    assert data["trace"]["annotated"] == {"file": "out.json", "instant_events": 2}
    assert Report.from_json(data).trace == r.trace


def test_install_reads_back_the_doctor_json_it_ran():
    from kernelcheck.core.status import Finding, FunctionStatus

    fs = FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fallback", "torch", "not installed", "pip install",
                        "prefill", True, {"calls": 0})
    fd = Finding("no-gpu", "info", "m", None, None, ("causal_conv1d_fn",))
    data = json.loads(render_json(Report("doctor", None, None, "train", [fs], [fd])))
    assert FunctionStatus.from_json({**data["functions"][0], "newer_key": 1}) == fs
    assert Finding.from_json(data["findings"][0]) == fd
