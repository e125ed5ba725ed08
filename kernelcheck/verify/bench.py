"""`verify --benchmark`: the model's kernel-calling layer timed on the bound path and on the forced
torch reference, in this process, on the same captured inputs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kernelcheck.core import matrix
from kernelcheck.core.status import Finding, Mode, Severity
from kernelcheck.report.live_details import (
    Benchmark,
    BenchmarkPass,
    BenchmarkRan,
    BenchmarkSkipped,
    BenchPath,
    PathFailed,
    PathTimed,
)
from kernelcheck.verify import layers, timing_controls
from kernelcheck.verify.instrument import Instrument
from kernelcheck.verify.steps import (
    Steps,
    first_line,
    run_profiled,
)


# -- benchmark ------------------------------------------------------------------------------------
def run_benchmark(steps: Steps, inst: Instrument, layer_class: str, mode: str, device: str,
               bwd_broken: set[str], *, m: matrix.Matrix) -> Benchmark:
    """Time the model's own layer (e.g. Qwen3_5GatedDeltaNet) on the bound path and on the forced torch
    reference, on the same captured inputs, in this process (each profiled call read on the matrix `m`)."""
    import torch

    layer_mods = layers.layer_modules(steps.built.model, layer_class)
    if not layer_mods:
        return BenchmarkSkipped(f"no {layer_class or 'kernel-calling'} layer in the built model")
    layer = layer_mods[0]
    args, kwargs = _capture_inputs(steps, layer)
    data = layers.verify_data(m=m)["benchmark"]
    gen = torch.Generator(device="cpu").manual_seed(7)

    def once_fwd() -> None:
        with torch.no_grad():
            layer(*args, **kwargs)

    # the layer's input (hidden_states) comes positionally or by keyword depending on the decoder layer
    key: int | str = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()),
                          next((k for k, v in kwargs.items() if isinstance(v, torch.Tensor) and v.is_floating_point()),
                               0))

    def once_train() -> None:
        a, kw = list(args), dict(kwargs)
        if isinstance(key, int):
            a[key] = a[key].detach().requires_grad_(True)
        else:
            kw[key] = kw[key].detach().requires_grad_(True)
        out = layer(*a, **kw)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(grad)

    with torch.no_grad():
        probe = layer(*args, **kwargs)
    probe = probe[0] if isinstance(probe, tuple) else probe
    grad = torch.randn(probe.shape, generator=gen).to(device=probe.device, dtype=probe.dtype)
    everything = set(inst.hooks)
    saved = set(inst.forced)
    # A function that failed only in backward still runs fast in a forward-only pass (fla#640 case).
    passes = [("forward", once_fwd, saved - bwd_broken)]
    if mode == Mode.TRAIN:
        passes.append(("forward+backward", once_train, saved))
    done: dict[str, BenchmarkPass] = {}
    inst.step = "bench"
    try:
        for pname, once, fast_forced in passes:
            fast = _time_path(steps, inst, once, fast_forced, data, device, f"bench-{pname}-fast", m=m)
            ref = _time_path(steps, inst, once, everything, data, device, f"bench-{pname}-reference", m=m)
            note = ("the bound path keeps " + ", ".join(sorted(fast_forced)) + " on the torch reference: it failed "
                    "in this environment") if fast_forced else None
            speedup, kernels, ops = _ratios(fast, ref)
            controls = None
            if speedup is not None and isinstance(fast, PathTimed):  # the ratio's controls, on the bound path
                inst.forced = set(fast_forced)
                controls = timing_controls.measure(once, steps.sync, layer, fast.ms,
                                                   timing_controls.fraction(float(data["control_slowdown"])),
                                                   int(data["control_repeats"]))
                inst.reset()
            claimed = speedup if controls is None or controls.decides(speedup) else None
            done[pname] = BenchmarkPass(fast, ref, claimed, kernels if claimed is not None else None, ops,
                                        note=note, controls=controls, ratio=speedup)
    finally:
        inst.forced = saved
    return BenchmarkRan(type(layer).__name__, int(steps.ids.shape[1]), done,
                        "forward+backward" if mode == Mode.TRAIN else "forward")


def _capture_inputs(steps: Steps, layer: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The layer's first call's inputs in one forward of the model: tensors cloned, caches dropped."""
    import torch

    got: dict[str, Any] = {}

    def grab(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if "x" not in got:
            got["x"] = (tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args),
                        {k: (v.detach().clone() if isinstance(v, torch.Tensor) else
                             None if "cache" in type(v).__name__.lower() or k in ("cache", "past_key_values",
                                                                                   "cache_params") else v)
                         for k, v in kwargs.items()})

    handle = layer.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            steps.built.model(input_ids=steps.ids, use_cache=False)
    finally:
        handle.remove()
    args, kwargs = got["x"]
    return args, kwargs


def _time_path(steps: Steps, inst: Instrument, once: Callable[[], None], forced: set[str], data: dict[str, Any],
               device: str, name: str, *, m: matrix.Matrix) -> BenchPath:
    """Time one pass with `forced` on the torch reference: its timing, or the error, and what was forced."""
    inst.forced = set(forced)
    try:
        got: BenchPath = _time(steps, once, data, device, name, sorted(forced), m=m)
    except Exception as exc:  # noqa: BLE001
        got = PathFailed(f"{type(exc).__name__}: {first_line(exc)}", sorted(forced))
    inst.reset()
    return got


def _ratios(f: BenchPath, r: BenchPath) -> tuple[float | None, float | None, float | None]:
    """Speedup, kernel and CPU-op ratios of the reference over the fast path, when both were timed (the kernel
    ratio when the fast path launched kernels)."""
    if not (isinstance(f, PathTimed) and isinstance(r, PathTimed) and f.ms > 0):
        return None, None, None
    return (round(r.ms / f.ms, 2), round(r.kernels / f.kernels, 1) if f.kernels else None,
            round(r.cpu_ops / max(1, f.cpu_ops), 1))


def _time(steps: Steps, once: Callable[[], None], data: dict[str, Any], device: str, name: str,
          forced: list[str], *, m: matrix.Matrix) -> PathTimed:
    """Median wall time of `once` (synchronised), then one profiled call for its kernel and op counts."""
    for _ in range(int(data["warmup"])):
        once()
    steps.sync()
    times: list[float] = []
    t_all = time.perf_counter()
    while len(times) < int(data["max_iters"]):
        t0 = time.perf_counter()
        once()
        steps.sync()
        times.append(time.perf_counter() - t0)
        if len(times) >= int(data["min_iters"]) and time.perf_counter() - t_all > float(data["min_seconds"]):
            break
    _, tr = run_profiled(steps, name, once, device, m=m)
    times.sort()
    bf = tr.stats.busy_fraction
    return PathTimed(round(times[len(times) // 2] * 1000, 3), len(times), tr.kernels, tr.cpu_ops,
                     None if bf is None else round(bf, 3), tr.launch_bound, forced)


def control_findings(bm: Benchmark | None) -> list[Finding]:
    """`benchmark-control-cannot-decide` per pass whose ratio is not claimed: fallback where the positive control
    (a known injected slowdown) was not detected, info where the ratio lies inside the A/A noise band."""
    if not isinstance(bm, BenchmarkRan):
        return []
    out: list[Finding] = []
    for pname, p in bm.passes.items():
        c = p.controls
        if c is None or p.speedup is not None:
            continue
        why = timing_controls.why_undecided(c, p.ratio)
        if not c.detected:
            out.append(Finding("benchmark-control-cannot-decide", Severity.FALLBACK,
                               f"{bm.layer} {pname}: this measurement cannot decide here: {why}; no speedup is "
                               "claimed.", "rerun --benchmark on an idle machine, with more --tokens or on the GPU"))
        else:
            out.append(Finding("benchmark-control-cannot-decide", Severity.INFO,
                               f"{bm.layer} {pname}: the bound path is not measurably faster: {why}; no speedup "
                               "is claimed."))
    return out
