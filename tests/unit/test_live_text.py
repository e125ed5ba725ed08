"""The live section's wording, tested once, here: report/live_text.py writes each kind of line from its values
(verify/statuses.py, verify/run.py and verify/step.py only add the values). One case per kind of line."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from kernelcheck.report import live_text
from kernelcheck.report.hub import PrintedLine
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
    ControlsLine,
    LaunchLine,
    LiveLine,
    NotRunLine,
    PassError,
    ProjectedSpeedupLine,
    ProjectionLine,
    ProjectionMethodLine,
    SamePathLine,
    SpeedupLine,
    StepPathLine,
    TimingLine,
    TritonCacheLine,
    WholeStepLine,
)
from kernelcheck.report.live_details import BenchmarkPass, PathTimed, Timing
from kernelcheck.report.step import (
    Failed,
    LayerCost,
    PathMeasured,
    PathProjection,
    StepCost,
    StepSection,
    TritonCache,
)
from kernelcheck.verify.timing_controls import decide

STEP = StepSection.from_json(json.loads((Path(__file__).resolve().parents[1] / "data" / "reports"
                                         / "verify_step.json").read_text())["step"])
assert isinstance(STEP.fast, PathMeasured)
BOUND = STEP.fast
PROJ = PathProjection(100.0, {"linear_attention": 1}, {"linear_attention": 48, "full_attention": 16},
                      {"linear_attention": LayerCost(1.0, 0.5, 1.5, [1.0, 2.0]),
                       "full_attention": LayerCost(1.0, 0.0, 1.0, [1.0, 1.005])}, 2.0, 1234.5, [1000.0, 1500.0], 6635.0)
FAST = PathTimed(1.5, 50, 40, 300, 0.812, False, [])
REF = PathTimed(4.5, 20, 400, 3000, 0.3, True, ["chunk_gated_delta_rule"])
COLD = StepCost(12.34, 0.5, 10.0, 11.0, TritonCache("/c", 3, 7, "cold", 0.5, "n"))

CASES: list[tuple[LiveLine, list[str]]] = [
    (PrintedLine("as printed"), ["as printed"]),
    (NotRunLine(), ["not run: the modeling module does not import"]),
    (BuiltLine("Qwen3_5ForCausalLM", "tiny", ("linear_attention", "full_attention"), 100_400, "float32", "cpu", 128),
     ["built Qwen3_5ForCausalLM (tiny: 2 layers linear_attention, full_attention; 0.10 M parameters, float32) on "
      "cpu; 128 tokens, batch 1"]),
    (LaunchLine("prefill", True, 100, 5000.0, 500, 0.9, 10_000.0, 12.34),
     ["prefill: 500 GPU kernels, the GPU was busy 90% of 10.0 ms (median kernel 12.3 us): not launch-bound."]),
    (TritonCacheLine("/c", 0, 12, cold=True),
     ["Triton cache /c: 0 -> 12 entries (cold: first-call compile dominated the time)"]),
    (ComparisonSkippedLine("every function ran its torch reference"),
     ["reference comparison: every function ran its torch reference"]),
    (ComparisonFailedLine("the torch reference run failed: boom"),
     ["reference comparison: the torch reference run failed: boom"]),
    (ComparisonLine(0.02, (PassError("train", 0.001, None, has_grads=True), PassError("prefill", 2e-05)), ok=False),
     ["vs torch reference (tolerance 0.02): train logits rel_err 0.001, grads rel_err None; prefill logits rel_err "
      "2e-05 - MISMATCH"]),
    (BenchmarkSkippedLine("no GatedDeltaNet layer in the built model"),
     ["benchmark: no GatedDeltaNet layer in the built model"]),
    (BenchmarkPassLines("GDN", "forward", 128, BenchmarkPass(FAST, REF, 3.0, 10.0, 10.0, "kept on the reference")),
     ["benchmark GDN forward on 128 tokens: bound path 1.5 ms, 40 kernels, 300 CPU ops; torch reference 4.5 ms, "
      "400 kernels, 3000 CPU ops", "  -> bound path 3.0x faster, 10.0x fewer kernels",
      "  GPU busy 81% on the bound path, 30% on the torch reference (launch-bound)", "  note: kept on the reference"]),
    (BenchmarkOnCpuLine(), ["  note: no GPU here, both paths are the torch reference: the ratio measures nothing"]),
    (TimingLine(Timing(2.21, 0.02, 0.6, 2.69, None, None, 5.64, 3.43)),
     ["time: static 2.2 s, build 0.0 s, first_pass 0.6 s, profile 2.7 s, total 5.6 s, excluding_import 3.4 s"]),
    (CapturedLine((("fast", "3 transformers line(s)"), ("reference", "1 other line(s)"))),
     ["third-party output captured (fast: 3 transformers line(s); reference: 1 other line(s)): --verbose shows it"]),
    (WholeStepLine("tiny", 32, False, BOUND),
     ["whole training step (tiny: 4 layers linear_attention, linear_attention, linear_attention, full_attention; "
      "32 tokens; checkpointing off; AdamW; cpu float32)"]),
    (StepPathLine("reference", Failed("the reference path ran past 900 s")),
     ["torch reference: failed: the reference path ran past 900 s"]),
    (SpeedupLine(1.31), ["  -> bound path 1.31x faster"]),
    (ControlsLine(decide(10.0, [10.0] * 3, [15.0] * 3, 0.5, 5.0), 1.01, False),
     ["  controls: same path timed twice 1.0x (noise +/-0.02); +50% injected, seen +50%: detected",
      "  -> the ratio 1.01x is within the noise band: no speedup is claimed"]),
    (ControlsLine(decide(10.0, [10.0] * 3, [10.0] * 3, 0.5, 5.0), 6.4, False),
     ["  controls: same path timed twice 1.0x (noise +/-0.02); +50% injected, seen +0%: missed",
      "  -> this measurement cannot decide here: no speedup is claimed"]),
    (SamePathLine(("chunk_gated_delta_rule: a.torch_chunk_gated_delta_rule", "causal_conv1d_fn: a.torch_conv",
                   "x: y")),
     ["  both paths ran the same code (chunk_gated_delta_rule: a.torch_chunk_gated_delta_rule; causal_conv1d_fn: "
      "a.torch_conv, ...): the numbers above are what this machine measured; no speedup, no projection"]),
    (ProjectionLine("fast", PROJ),  # a spread over 1% of the layer's cost is said, a smaller one is not
     ["projection (bound path) to 48 linear_attention + 16 full_attention: 1,234.5 ms/step, 6,635 tok/s (per layer: "
      "linear_attention 1.50 ms (steps 1.0-2.0), full_attention 1.00 ms; embedding/head/loss/rest 2.0 ms)"]),
    (ProjectedSpeedupLine(1.28), ["  -> projected speedup 1.28x"]),
    (ProjectionMethodLine(),
     ["projection: measured step + (real - built layers) x per-layer cost (GPU time of the kernels its ranges "
      "launched + the gaps the GPU waited for them, plus its parameter share of the optimizer); see --json "
      "step.projection.method"]),
    (CheckCostLine(COLD),
     ["cost of this check: 12.3 s (first bound-path step 0.5 s; cold Triton cache: 7 kernels compiled and "
      "autotuned; a rerun is the warm cost)"]),
]


@pytest.mark.parametrize("item, said", CASES, ids=[type(i).__name__ for i, _ in CASES])
def test_each_line_kind_has_its_sentence(item: LiveLine, said: list[str]) -> None:
    assert live_text.lines([item]) == said


def test_every_kind_of_line_has_its_case_here() -> None:
    assert {type(i) for i, _ in CASES} == set(typing.get_args(LiveLine))


def test_the_launch_sentence_says_a_cpu_step_no_kernel_and_a_launch_bound_one() -> None:
    cpu = LaunchLine("train", False, 3559, 21_300.0, 0, None, 0.0, 0.0)
    assert live_text.launch(cpu) == ("train: 3559 CPU ops in 21.3 ms on the CPU; no GPU here, so there is no GPU "
                                     "time to compare.")
    idle = LaunchLine("decode", True, 10, 1.0, 0, None, 1.0, 0.0)
    assert live_text.launch(idle) == "decode: no GPU kernel ran."
    bound = LaunchLine("decode", True, 10, 1.0, 900, 0.1, 1.0, 2.0, launch_bound="the GPU sat idle 90% of decode")
    assert live_text.launch(bound) == "decode: the GPU sat idle 90% of decode (launch-bound)."


def test_a_measured_path_and_a_failed_projection() -> None:
    assert live_text.lines([StepPathLine("fast", BOUND), ProjectionLine("reference", Failed("no measured layer"))]) == [
        "bound path: 414.5 ms/step, 77 tok/s, 0 kernels and 10,794 CPU ops per step, GPU busy -, peak 0.40 GiB",
        "projection (reference): no measured layer"]
