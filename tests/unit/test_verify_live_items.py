"""What verify decides its live section says, as typed lines (report/live.py): which kinds, in which order, with
which values; and the step's typed section and findings. The wording is tested in tests/unit/test_live_text.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kernelcheck.core import matrix
from kernelcheck.report.live import (
    BenchmarkOnCpuLine,
    BenchmarkPassLines,
    BenchmarkSkippedLine,
    BuiltLine,
    CapturedLine,
    CheckCostLine,
    ComparisonFailedLine,
    ComparisonLine,
    ComparisonSkippedLine,
    LaunchLine,
    PassError,
    ProjectedSpeedupLine,
    ProjectionLine,
    ProjectionMethodLine,
    SpeedupLine,
    StepPathLine,
    TimingLine,
    TritonCacheLine,
    WholeStepLine,
)
from kernelcheck.report.live_details import (
    BenchmarkPass,
    BenchmarkRan,
    BenchmarkSkipped,
    PathFailed,
    PathTimed,
    Timing,
)
from kernelcheck.report.step import Failed, PathMeasured, StepSection, WorkerCost
from kernelcheck.report.trace import FallbackSignature, LaunchDelay
from kernelcheck.verify import evidence
from kernelcheck.verify import step as step_mod
from kernelcheck.verify.layers import BuiltModel
from kernelcheck.verify.statuses import live_items
from kernelcheck.verify.steps import LiveRun

DATA = Path(__file__).resolve().parents[1] / "data" / "reports"
STEP_JSON = json.loads((DATA / "verify_step.json").read_text())["step"]
MC = {"train": {"logits": {"rel_err": 0.001, "max_abs_err": 0.002, "ok": True},
                "grads": {"rel_err": 0.5, "worst_parameter": "w", "worst_parameter_rel_err": 0.9, "parameters": 2,
                          "ok": False}, "ok": False},
      "decode": {"logits": {"rel_err": None, "max_abs_err": None, "ok": False}, "ok": False}, "tolerance": 0.02,
      "ok": False}  # verify/compare.compare_results's keys
FORWARD = BenchmarkPass(PathTimed(1.5, 20, 4, 30, 0.5, False, []), PathFailed("RuntimeError: boom", ["f"]), note="n")
BENCH = BenchmarkRan("GDN", 64, {"forward": FORWARD}, "forward")  # verify/bench.run_benchmark's value
TIMING = {"static_s": 1.0, "build_s": 0.1, "first_pass_s": 0.5, "total_s": 2.0, "excluding_import_s": 1.0}


def run(device: str = "cpu", **kw) -> LiveRun:
    built = BuiltModel(None, "qwen3_5", "Qwen3_5ForCausalLM", "tiny", ("linear_attention", "full_attention"),
                       device, "float32", 100_400)
    r = LiveRun(built=built, tokens=128, mode="train", timing=dict(TIMING))
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def test_a_run_says_what_was_built_the_comparison_the_benchmark_and_the_time_in_that_order() -> None:
    items = live_items(run(triton={"cache_dir": "/c", "entries_before": 0, "entries_after": 5, "cold": True},
                           model_compare=MC, benchmark=BENCH))
    assert [type(i) for i in items] == [BuiltLine, TritonCacheLine, ComparisonLine, BenchmarkPassLines,
                                        BenchmarkOnCpuLine, TimingLine]
    built, cache, cmp, bench, _, timing = items
    assert built == BuiltLine("Qwen3_5ForCausalLM", "tiny", ("linear_attention", "full_attention"), 100_400,
                              "float32", "cpu", 128)
    assert cache == TritonCacheLine("/c", 0, 5, cold=True)
    assert cmp == ComparisonLine(0.02, (PassError("train", 0.001, 0.5, has_grads=True), PassError("decode", None)),
                                 ok=False)
    assert bench == BenchmarkPassLines("GDN", "forward", 64, FORWARD)
    assert timing == TimingLine(Timing(1.0, 0.1, 0.5, None, None, None, 2.0, 1.0))


def test_a_gpu_run_has_a_launch_line_per_step_and_no_cpu_note() -> None:
    from tests.unit.test_verify_attribution import _trace

    tr = evidence.analyze("prefill", _trace(), m=matrix.load())
    items = live_items(run("cuda:0", traces={"prefill": tr}, benchmark=BENCH))
    assert [type(i) for i in items] == [BuiltLine, LaunchLine, BenchmarkPassLines, TimingLine]
    assert isinstance(items[1], LaunchLine) and items[1].step == "prefill" and items[1].on_gpu


def test_a_skipped_or_failed_comparison_and_a_skipped_benchmark_are_their_own_kinds() -> None:
    skipped = live_items(run(model_compare={"skipped": "every function ran its torch reference"},
                             benchmark=BenchmarkSkipped("no GDN layer")))
    assert skipped[1:3] == [ComparisonSkippedLine("every function ran its torch reference"),
                            BenchmarkSkippedLine("no GDN layer")]
    failed = live_items(run(model_compare={"error": "the torch reference run failed: boom", "ok": None}))
    assert failed[1] == ComparisonFailedLine("the torch reference run failed: boom")
    assert [type(i) for i in live_items(run())] == [BuiltLine, TimingLine]  # nothing compared, no cache, no bench


def test_the_step_section_types_each_path_and_reads_back_as_printed() -> None:
    step = StepSection.from_json(STEP_JSON)
    assert isinstance(step.fast, PathMeasured) and step.fast.layers == ["linear_attention"] * 3 + ["full_attention"]
    assert isinstance(step.fast.cost, WorkerCost) and step.fast.cost.process_s >= step.fast.cost.total_s
    assert isinstance(step.fast.launch_delay_ms, LaunchDelay) and step.fast.fallback_signatures == []
    assert step.speedup == 1.31 and step.kernel_ratio is None and step.cost.triton_cache.state == "warm"
    assert json.dumps(step.to_json(), indent=2) == json.dumps(STEP_JSON, indent=2)
    failed = StepSection.from_json({**STEP_JSON, "paths": {"fast": {"error": "boom"},
                                                           "reference": STEP_JSON["paths"]["reference"]}})
    assert failed.fast == Failed("boom") and failed.measured() == failed.reference


def test_the_step_says_its_paths_speedup_projections_and_cost_and_the_captured_output_without_verbose() -> None:
    step = StepSection.from_json(STEP_JSON)
    items = step_mod.live_items(step, verbose=False)
    assert [type(i) for i in items] == [WholeStepLine, StepPathLine, StepPathLine, SpeedupLine, ProjectionLine,
                                        ProjectionLine, ProjectedSpeedupLine, ProjectionMethodLine, CheckCostLine,
                                        CapturedLine]
    assert items[0] == WholeStepLine("tiny", 32, True, step.fast)
    assert items[1:4] == [StepPathLine("fast", step.fast), StepPathLine("reference", step.reference),
                          SpeedupLine(1.31, None)]
    assert items[-1] == CapturedLine(tuple(STEP_JSON["captured_output"].items()))
    assert CapturedLine not in {type(i) for i in step_mod.live_items(step, verbose=True)}


def test_a_step_without_speedups_says_none_and_one_with_no_path_names_no_model() -> None:
    neither = dataclasses.replace(StepSection.from_json(STEP_JSON), fast=Failed("a"), reference=Failed("b"),
                                  speedup=None)
    neither = dataclasses.replace(neither, projection=dataclasses.replace(neither.projection, projected_speedup=None))
    kinds = {type(i) for i in step_mod.live_items(neither, verbose=True)}
    assert not kinds & {SpeedupLine, ProjectedSpeedupLine}
    assert step_mod.live_items(neither, verbose=True)[0] == WholeStepLine("tiny", 32, True, None)


def test_step_findings_come_from_the_bound_path_values() -> None:
    step = StepSection.from_json(STEP_JSON)
    assert isinstance(step.fast, PathMeasured)
    ok = {"path": "reference"}
    assert [f.id for f in step_mod._findings({}, ok, 32, step.fast)] == ["verify-cpu"]
    gpu = dataclasses.replace(step.fast, device="cuda:0", launch_bound=True, fallback_signatures=[
        FallbackSignature("torch-gdn", "fla", ["chunk_gated_delta_rule"], None, "e")])
    found = step_mod._findings({}, {"error": "boom"}, 32, gpu)
    assert [f.id for f in found] == ["verify-step-reference-failed", "step-torch-gdn", "step-launch-bound"]
    assert found[1].functions == ("chunk_gated_delta_rule",)
    assert [f.id for f in step_mod._findings({"error": "x"}, ok, 32, Failed("x"))] == ["verify-step-failed"]


def test_the_h200_step_reads_back_with_its_fallback_signatures_typed_as_the_trace_reports() -> None:
    """verify --step's whole-step signatures are report/trace.FallbackSignature values without `steps` (the worker
    writes them with FallbackSignature.to_json); its cost and launch delay are typed; the JSON is unchanged."""
    data = json.loads((DATA / "verify_step_h200.json").read_text())["step"]
    step = StepSection.from_json(data)
    ref = step.reference
    assert isinstance(ref, PathMeasured) and [m.id for m in ref.fallback_signatures] == [
        s["id"] for s in data["paths"]["reference"]["fallback_signatures"]] and ref.fallback_signatures
    assert all(isinstance(m, FallbackSignature) and m.steps is None for m in ref.fallback_signatures)
    assert list(ref.fallback_signatures[0].to_json()) == ["id", "package", "functions", "evidence"]
    assert ref.cost.started_at < ref.cost.gate_passed_at < ref.cost.finished_at
    assert json.dumps(step.to_json(), indent=2) == json.dumps(data, indent=2)


def test_a_step_whose_paths_ran_the_same_code_reports_what_it_measured_and_no_speedup_projection_or_cache() -> None:
    from kernelcheck.report import live_text
    from kernelcheck.report.step import TritonCache

    step = StepSection.from_json(STEP_JSON)
    assert isinstance(step.fast, PathMeasured) and isinstance(step.reference, PathMeasured)
    torch_only = ["chunk_gated_delta_rule: transformers.models.qwen3_5.modeling_qwen3_5.torch_chunk_gated_delta_rule"]
    fast = dataclasses.replace(step.fast, implementations=torch_only)
    ref = dataclasses.replace(step.reference, implementations=list(torch_only))
    assert step_mod.same_path(fast, ref) and not step_mod.same_path(fast, Failed("boom"))
    assert not step_mod.same_path(fast, dataclasses.replace(ref, implementations=["chunk_gated_delta_rule: fla.x"]))
    cache = TritonCache("/c", 0, 0, "none", 1.0, "both paths ran the same code")
    same = dataclasses.replace(step, fast=fast, reference=ref, speedup=None, same_path=True,
                               cost=dataclasses.replace(step.cost, triton_cache=cache))
    items = step_mod.live_items(same, verbose=True)
    assert [type(i).__name__ for i in items] == ["WholeStepLine", "StepPathLine", "StepPathLine", "SamePathLine",
                                                 "CheckCostLine"]
    text = "\n".join(live_text.lines(items))
    assert "both paths ran the same code" in text  # wording: renderer test
    assert "faster" not in text and "projection (" not in text and "projected" not in text
    assert "came from the cache" not in text
    assert StepSection.from_json(same.to_json()).same_path and same.to_json()["same_path"] is True


def test_an_empty_triton_cache_that_stayed_empty_is_not_a_line() -> None:
    """A box without Triton (or a run no Triton kernel ran in) printed "Triton cache ...: 0 -> 0 entries"."""
    items = live_items(run(triton={"cache_dir": "/c", "entries_before": 0, "entries_after": 0, "cold": False}))
    assert TritonCacheLine not in [type(i) for i in items]
    warm = live_items(run(triton={"cache_dir": "/c", "entries_before": 7, "entries_after": 7, "cold": False}))
    assert TritonCacheLine in [type(i) for i in warm]
