"""The live section's details are typed (report/live_details.py): real verify reports (tests/data/reports/verify.json on
a CPU, the H200's in docs/measurements/2026-12-04-h200-differential-2ef81b4) read back into LiveDetails, write the same
JSON in the same key order, and the comparison line they printed is made again from the typed comparison
(verify/statuses.comparison_lines)."""

from __future__ import annotations

import json
import tarfile
from dataclasses import fields
from pathlib import Path

import pytest

from kernelcheck.report import live_text
from kernelcheck.report.live import ComparisonFailedLine, ComparisonLine
from kernelcheck.report.live_details import (
    BenchmarkPass,
    BenchmarkRan,
    BenchmarkSkipped,
    Compared,
    ComparisonError,
    ComparisonSkipped,
    LiveDetails,
    NotCompared,
    PathFailed,
    PathTimed,
    ProfiledStep,
    Timing,
    benchmark,
    comparison,
)
from kernelcheck.report.model import Report, render_json
from kernelcheck.report.trace import OpCount, StepRow
from kernelcheck.verify.statuses import comparison_lines

ROOT = Path(__file__).resolve().parents[2]


def h200_verify_reports() -> dict[str, dict]:
    record = ROOT / "docs" / "measurements" / "2026-12-04-h200-differential-2ef81b4"
    with tarfile.open(record / "differential-2ef81b4.tgz") as tar:
        out = {}
        for m in tar.getmembers():
            if m.name.endswith(("verify-train.json", "verify-infer.json")):
                fh = tar.extractfile(m)
                assert fh is not None
                out[m.name] = json.loads(fh.read())
    assert len(out) == 8
    return out


def test_the_cpu_verify_report_reads_back_into_typed_details_in_the_same_key_order() -> None:
    raw = (ROOT / "tests" / "data" / "reports" / "verify.json").read_text()
    data = json.loads(raw)
    rep = Report.from_json(data)
    assert rep.live is not None and isinstance(rep.live.details, LiveDetails)
    d = rep.live.details
    assert (d.device, d.dtype, d.shape, d.tokens) == ("cpu", "float32", "tiny", 128)
    assert d.model.model_class == "Qwen3_5ForCausalLM" and d.model.layers == ["linear_attention", "full_attention"]
    assert list(d.steps) == ["train", "prefill", "decode"]
    assert all(isinstance(s, ProfiledStep) for s in d.steps.values())
    train = d.steps["train"]
    assert isinstance(train.stats, StepRow) and train.stats.name == "the train step"
    assert train.stats.cpu_ops == 3559 and train.stats.kernels == 0 and not train.launch_bound
    assert train.stats.top_ops_by_count[0] == OpCount("aten::as_strided", 338) and train.fallback_signatures == []
    assert isinstance(d.reference_comparison, ComparisonSkipped) and d.benchmark is None
    assert d.triton_cache.cache_dir == "/root/.triton/cache" and not d.triton_cache.cold
    assert d.timing.ran()[0] == ("static_s", 2.244) and d.timing.total_s == 5.562 and d.timing.benchmark_s is None
    assert json.dumps(rep.live.to_json()) == json.dumps(data["live"])  # the key order too
    assert render_json(rep) + "\n" == raw


def test_the_h200_verify_reports_hold_their_comparison_typed_and_its_line_is_made_again() -> None:
    for name, data in h200_verify_reports().items():
        rep = Report.from_json(data)
        assert rep.live is not None and rep.live.details is not None, name
        d = rep.live.details
        assert d.device == "cuda:0" and d.dtype == "bfloat16", name
        assert json.dumps(rep.live.to_json()) == json.dumps(data["live"]), name
        made = live_text.lines(comparison_lines(d.reference_comparison))
        assert len(made) == 1 and made[0] in data["live"]["lines"], name
        if name.endswith("baseline/verify-train.json"):
            c = d.reference_comparison
            assert isinstance(c, Compared) and c.ok and c.tolerance == 0.05
            assert list(c.steps) == ["train", "prefill", "decode"]
            grads = c.steps["train"].grads
            assert grads is not None and grads.worst_parameter == "model.layers.0.linear_attn.A_log"
            assert c.steps["prefill"].grads is None and c.steps["prefill"].logits.rel_err == 0.0042
            assert d.steps["train"].stats.kernels > 0 and d.triton_cache.entries_before == 240


EXTRAS = ["launch_bound", "launch_bound_sentence", "fast_packages", "fallback_signatures"]


def test_a_profiled_step_is_a_trace_step_row_and_its_reading_in_one_flat_object() -> None:
    """One type for a step's statistics: ProfiledStep's JSON is StepRow's keys in their order, then its own four;
    a field added to StepRow (the trace report's step) appears in the live section's steps too, and nowhere else."""
    assert [f.name for f in fields(ProfiledStep)] == ["stats", *EXTRAS]
    rows = [f.name for f in fields(StepRow)]
    reports = [json.loads((ROOT / "tests" / "data" / "reports" / "verify.json").read_text()),
               *h200_verify_reports().values()]
    seen = 0
    for data in reports:
        for name, raw in data["live"]["steps"].items():
            step = ProfiledStep.from_json(raw)
            assert list(step.to_json()) == list(raw) == [*rows, *EXTRAS], name
            assert json.dumps(step.to_json()) == json.dumps(raw), name
            assert step.stats == StepRow.from_json({k: raw[k] for k in rows}), name
            assert all(isinstance(i, str) for i in step.fallback_signatures), name  # signature ids
            seen += 1
    assert seen > 20


@pytest.mark.parametrize("data, kind", [
    ({"skipped": "every function ran its torch reference: the run is the reference"}, ComparisonSkipped),
    ({"error": "the torch reference run failed: RuntimeError: boom", "ok": None}, ComparisonError),
    ({}, NotCompared),
    ({"decode": {"logits": {"rel_err": None, "max_abs_err": None, "ok": False}, "ok": False}, "tolerance": 0.02,
      "ok": False}, Compared),
])
def test_each_comparison_shape_reads_back_as_its_type_and_writes_the_same_json(data: dict, kind: type) -> None:
    typed = comparison(data)
    assert isinstance(typed, kind)
    assert json.dumps(typed.to_json()) == json.dumps(data)


def test_the_comparison_lines_read_the_typed_values() -> None:
    [failed] = comparison_lines(comparison({"error": "the torch reference run failed: boom", "ok": None}))
    assert isinstance(failed, ComparisonFailedLine) and failed.error == "the torch reference run failed: boom"
    assert comparison_lines(NotCompared()) == []
    [line] = comparison_lines(comparison({"train": {"logits": {"rel_err": 0.3, "max_abs_err": 1.0, "ok": False},
                                                    "ok": False}, "tolerance": 0.05, "ok": False}))
    assert isinstance(line, ComparisonLine) and line.tolerance == 0.05 and not line.ok
    assert [(p.step, p.logits_rel_err, p.has_grads) for p in line.passes] == [("train", 0.3, False)]


def test_a_profiled_step_holds_the_row_of_the_trace_analysis_and_the_ids_it_matched() -> None:
    """verify's step (verify/statuses.profiled_step) is the same StepRow `kernelcheck trace` prints for a step."""
    from kernelcheck.core import matrix
    from kernelcheck.trace import analysis
    from kernelcheck.verify.evidence import StepTrace
    from kernelcheck.verify.statuses import profiled_step

    an = analysis.analyze_file(ROOT / "tests" / "data" / "gpu" / "gdn_fallback.json.gz", m=matrix.load())
    tr = StepTrace("train", (), an.summary, True, an.fast_packages, tuple(m.id for m in an.fallbacks))
    step = profiled_step(tr, "cuda:0")
    assert step.stats == an.summary.row() and step.launch_bound
    assert step.fallback_signatures == ["fla-torch-fallback", "causal-conv1d-torch-fallback"]
    assert step.launch_bound_sentence.startswith("train: ") and ProfiledStep.from_json(step.to_json()) == step
    assert list(step.to_json()) == [*an.summary.to_json(), *EXTRAS]


# verify --benchmark on an H200 (docs/measurements/2026-12-02-h200-verify-traces-bc0345f/full_infer.json:
# Qwen3.8-27B's layer, full shape, infer)
H100_INFER = ROOT / "docs" / "measurements" / "2026-12-02-h200-verify-traces-bc0345f" / "full_infer.json"
TIMED = {"ms": 1.5, "iters": 50, "kernels": 37, "cpu_ops": 170, "gpu_busy_fraction": None, "launch_bound": False,
         "forced_torch": []}
FAILED = {"error": "RuntimeError: boom", "forced_torch": ["chunk_gated_delta_rule"]}
NOTE = "the bound path keeps f on the torch reference: it failed in this environment"


def test_a_recorded_benchmark_and_its_timing_read_back_typed_and_write_the_same_json() -> None:
    live = json.loads(H100_INFER.read_text())["live"]
    bm = benchmark(live["benchmark"])
    assert isinstance(bm, BenchmarkRan) and (bm.layer, bm.tokens, bm.main) == ("Qwen3_5GatedDeltaNet", 8192, "forward")
    fwd = bm.passes["forward"]
    assert isinstance(fwd.fast, PathTimed) and fwd.fast.ms == 5.226 and fwd.fast.forced_torch == []
    assert isinstance(fwd.reference, PathTimed) and fwd.reference.launch_bound and len(fwd.reference.forced_torch) == 4
    assert (fwd.speedup, fwd.kernel_ratio, fwd.cpu_op_ratio, fwd.note) == (6.39, 33.2, 51.1, None)
    assert json.dumps(bm.to_json()) == json.dumps(live["benchmark"])  # the main pass repeated flat, in order
    timing = Timing.from_json(live["timing"])
    assert timing.benchmark_s == 16.357 and json.dumps(timing.to_json()) == json.dumps(live["timing"])


@pytest.mark.parametrize("data", [
    {"skipped": "no Qwen3_5GatedDeltaNet layer in the built model"},
    {"layer": "GDN", "tokens": 64, "passes": {"forward": {"fast": TIMED, "reference": FAILED, "note": NOTE}},
     "pass": "forward", "fast": TIMED, "reference": FAILED, "note": NOTE},
    {"layer": "GDN", "tokens": 64,
     "passes": {"forward": {"fast": TIMED, "reference": {**TIMED, "ms": 3.0}, "speedup": 2.0, "kernel_ratio": 1.0,
                            "cpu_op_ratio": 1.0},
                "forward+backward": {"fast": {**TIMED, "kernels": 0}, "reference": TIMED, "speedup": 1.0,
                                     "cpu_op_ratio": 1.0}},
     "pass": "forward+backward", "fast": {**TIMED, "kernels": 0}, "reference": TIMED, "speedup": 1.0,
     "cpu_op_ratio": 1.0},
])
def test_each_benchmark_shape_reads_back_as_its_type_and_writes_the_same_json(data: dict) -> None:
    """verify/bench.run_benchmark's shapes: skipped; passes whose paths were timed or raised, the ratios only when
    both were timed (the kernel ratio only when the bound path launched kernels), a note when it kept functions on
    the reference; the mode's pass repeated after `pass`."""
    typed = benchmark(data)
    assert isinstance(typed, BenchmarkSkipped if "skipped" in data else BenchmarkRan)
    assert json.dumps(typed.to_json()) == json.dumps(data)
    if isinstance(typed, BenchmarkRan):
        assert all(isinstance(p, BenchmarkPass) for p in typed.passes.values())
        assert {type(p.reference) for p in typed.passes.values()} <= {PathTimed, PathFailed}


def test_timing_writes_the_phases_that_ran_in_the_order_they_run() -> None:
    first_pass_failed = Timing(1.0, 0.1, 0.5, None, None, None, 2.0, 1.0)
    assert list(first_pass_failed.to_json()) == ["static_s", "build_s", "first_pass_s", "total_s", "excluding_import_s"]
    bench = Timing(1.0, 0.1, 0.5, 0.2, 0.3, 4.0, 6.0, 5.0)
    assert list(bench.to_json()) == ["static_s", "build_s", "first_pass_s", "profile_s", "compare_s", "benchmark_s",
                                     "total_s", "excluding_import_s"]
    assert all(Timing.from_json(t.to_json()) == t for t in (bench, first_pass_failed))
