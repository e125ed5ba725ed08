"""The live section's sentences (its JSON `lines` and the `live (verify)` block of the text), from report/live.py's
values: a run of the real layers (verify, doctor --live) and a whole training step (verify --step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from kernelcheck.report.live_details import BenchPath, PathTimed
from kernelcheck.report.step import Failed, LayerCost, PathProjection


def lines(items: list[LiveLine]) -> list[str]:
    """The section's lines, in the order its items were added."""
    out: list[str] = []
    for item in items:
        out.extend(_RENDER[type(item)](item))
    return out


def launch(item: LaunchLine) -> str:
    """The launch-bound signal in words: CPU ops on a CPU; GPU busy vs the step's wall time and kernels on a GPU
    (also the JSON's live.steps[].launch_bound_sentence)."""
    if not item.on_gpu:
        return (f"{item.step}: {item.cpu_ops} CPU ops in {item.cpu_span_us / 1000:.1f} ms on the CPU; no GPU here, "
                "so there is no GPU time to compare.")
    if item.launch_bound is not None:
        return f"{item.step}: {item.launch_bound} (launch-bound)."
    if item.busy_fraction is None:
        return f"{item.step}: no GPU kernel ran."
    return (f"{item.step}: {item.kernels:,} GPU kernels, the GPU was busy {item.busy_fraction:.0%} of "
            f"{item.wall_us / 1000:.1f} ms (median kernel {item.median_kernel_us:.1f} us): not launch-bound.")


def _built(b: BuiltLine) -> list[str]:
    return [f"built {b.model_class} ({b.shape}: {len(b.layer_types)} layers {', '.join(b.layer_types)}; "
            f"{b.parameters / 1e6:.2f} M parameters, {b.dtype}) on {b.device}; {b.tokens} tokens, batch 1"]


def _triton(tc: TritonCacheLine) -> list[str]:
    return [f"Triton cache {tc.cache_dir}: {tc.entries_before} -> {tc.entries_after} entries"
            + (" (cold: first-call compile dominated the time)" if tc.cold else "")]


def _comparison(c: ComparisonLine) -> list[str]:
    parts = [f"{p.step} logits rel_err {p.logits_rel_err}" + (f", grads rel_err {p.grads_rel_err}" if p.has_grads
                                                              else "") for p in c.passes]
    return [f"vs torch reference (tolerance {c.tolerance}): " + "; ".join(parts) + (" - OK" if c.ok else " - MISMATCH")]


def _timed(t: BenchPath) -> str:
    return f"{t.ms} ms, {t.kernels} kernels, {t.cpu_ops} CPU ops" if isinstance(t, PathTimed) else f"failed: {t.error}"


def _faster(speedup: float, kernel_ratio: float | None) -> str:
    kr = f", {kernel_ratio}x fewer kernels" if kernel_ratio else ""
    return f"  -> bound path {speedup}x faster{kr}"


def _controls(c: ControlsLine) -> list[str]:
    k = c.controls
    out = [f"  controls: same path timed twice {k.aa_ratio}x (noise +/-{k.noise_band:.2f}); "
           f"{k.expected_slowdown:+.0%} injected, seen {k.measured_slowdown:+.0%}: "
           + ("detected" if k.detected else "missed")]
    if not k.detected:
        out.append("  -> this measurement cannot decide here: no speedup is claimed")
    elif c.ratio is not None and not c.decided:
        out.append(f"  -> the ratio {c.ratio}x is within the noise band: no speedup is claimed")
    return out


def _benchmark_pass(b: BenchmarkPassLines) -> list[str]:
    p = b.result
    f, r = p.fast, p.reference
    out = [f"benchmark {b.layer} {b.name} on {b.tokens} tokens: bound path {_timed(f)}; torch reference {_timed(r)}"]
    if p.speedup is not None:
        out.append(_faster(p.speedup, p.kernel_ratio))
    if p.controls is not None:
        out.extend(_controls(ControlsLine(p.controls, p.ratio, p.speedup is not None)))
    if (isinstance(f, PathTimed) and isinstance(r, PathTimed) and f.gpu_busy_fraction is not None
            and r.gpu_busy_fraction is not None):
        out.append(f"  GPU busy {f.gpu_busy_fraction:.0%} on the bound path, {r.gpu_busy_fraction:.0%} on the torch "
                   "reference" + (" (launch-bound)" if r.launch_bound else ""))
    if p.note:
        out.append(f"  note: {p.note}")
    return out


def _timing(t: TimingLine) -> list[str]:
    return ["time: " + ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in t.timing.ran())]


def _captured(c: CapturedLine) -> list[str]:
    got = "; ".join(f"{path}: {s}" if path is not None else s for path, s in c.summaries)
    return [f"third-party output captured ({got}): --verbose shows it"]


_LABEL = {"fast": "bound path", "reference": "torch reference"}


def _whole_step(w: WholeStepLine) -> list[str]:
    m = w.measured
    layers = m.layers if m is not None else []
    adamw = " fused" if m is not None and m.fused_adamw else ""
    device, dtype = (m.device, m.dtype) if m is not None else ("?", "")
    return [f"whole training step ({w.shape}: {len(layers)} layers {', '.join(layers)}; {w.tokens} tokens; "
            f"checkpointing {'on' if w.checkpointing else 'off'}; AdamW{adamw}; {device} {dtype})"]


def _step_path(s: StepPathLine) -> list[str]:
    name, p = _LABEL[s.name], s.path
    if isinstance(p, Failed):
        return [f"{name}: failed: {p.error}"]
    busy = "-" if p.gpu_busy_fraction is None else f"{p.gpu_busy_fraction:.0%}"
    gib = p.peak_memory_bytes / 2**30
    return [f"{name}: {p.step_ms:,.1f} ms/step, {p.tokens_per_s:,.0f} tok/s, {p.kernels_per_step:,} kernels and "
            f"{p.cpu_ops_per_step:,} CPU ops per step, GPU busy {busy}, peak {gib:.2f} GiB"
            + (" (launch-bound)" if p.launch_bound else "")]


def _spread(c: LayerCost) -> str:
    """' (steps 51.0-53.2)' when the profiled steps differ by more than 1%, else nothing."""
    lo, hi = c.spread_ms or (c.total_ms, c.total_ms)
    return f" (steps {lo:.1f}-{hi:.1f})" if hi - lo > 0.01 * c.total_ms else ""


def _projection(pl: ProjectionLine) -> list[str]:
    p = pl.projection
    if isinstance(p, Failed):
        return [f"projection ({pl.name}): {p.error}"]
    return [_projected(_LABEL[pl.name], p)]


def _projected(label: str, p: PathProjection) -> str:
    per = ", ".join(f"{t} {c.total_ms:.2f} ms{_spread(c)}" for t, c in p.per_layer.items())
    full = " + ".join(f"{n} {t}" for t, n in p.full_layers.items())
    return (f"projection ({label}) to {full}: {p.projected_step_ms:,.1f} ms/step, "
            f"{p.projected_tokens_per_s or 0:,.0f} tok/s (per layer: {per}; embedding/head/loss/rest "
            f"{p.rest_ms:.1f} ms)")


def _check_cost(cc: CheckCostLine) -> list[str]:
    c, tc = cc.cost, cc.cost.triton_cache
    how = (f"cold Triton cache: {tc.entries_added} kernels compiled and autotuned; a rerun is the warm cost"
           if tc.cold else "no fast path ran, so no Triton cache to speak of" if tc.state == "none"
           else "warm: nothing compiled, every Triton kernel came from the cache")
    return [f"cost of this check: {c.total_s:.1f} s (first bound-path step {c.fast_first_step_s} s; {how})"]


_METHOD = ("projection: measured step + (real - built layers) x per-layer cost (GPU time of the kernels its ranges "
           "launched + the gaps the GPU waited for them, plus its parameter share of the optimizer); see --json "
           "step.projection.method")

_RENDER: dict[type[Any], Callable[[Any], list[str]]] = {
    PrintedLine: lambda i: [i.text],
    NotRunLine: lambda _i: ["not run: the modeling module does not import"],
    BuiltLine: _built,
    LaunchLine: lambda i: [launch(i)],
    TritonCacheLine: _triton,
    ComparisonSkippedLine: lambda i: [f"reference comparison: {i.why}"],
    ComparisonFailedLine: lambda i: [f"reference comparison: {i.error}"],
    ComparisonLine: _comparison,
    BenchmarkSkippedLine: lambda i: [f"benchmark: {i.why}"],
    BenchmarkPassLines: _benchmark_pass,
    BenchmarkOnCpuLine: lambda _i: ["  note: no GPU here, both paths are the torch reference: the ratio measures "
                                    "nothing"],
    TimingLine: _timing,
    CapturedLine: _captured,
    WholeStepLine: _whole_step,
    StepPathLine: _step_path,
    SpeedupLine: lambda i: [_faster(i.speedup, i.kernel_ratio)],
    ProjectionLine: _projection,
    ProjectedSpeedupLine: lambda i: [f"  -> projected speedup {i.speedup}x"],
    ProjectionMethodLine: lambda _i: [_METHOD],
    CheckCostLine: _check_cost,
    ControlsLine: _controls,
    SamePathLine: lambda i: [f"  both paths ran the same code ({'; '.join(i.implementations[:2])}"
                             f"{', ...' if len(i.implementations) > 2 else ''}): the numbers above are what this "
                             "machine measured; no speedup, no projection"],
}
