"""Attribute a profiler trace's CPU ops and GPU kernels to kernelcheck's per-call ranges.

A call range (`kernelcheck::<function>::<step>::L<layer>#<n>`, see instrument.py) owns:
- the CPU ops recorded inside it on the same thread;
- the GPU kernels, memcpys and memsets whose launch (the `cuda_runtime`/`cuda_driver` event with the same
  `correlation` id: Triton kernels go through `cuLaunchKernelEx`, a driver call) happened inside it.
The backward of a call is its own range (`...::backward`), opened on the autograd thread.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck.instrument import RANGE_PREFIX

_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class RangeStats:
    """What one call range caused."""

    name: str
    function: str
    step: str
    layer: int | None
    backward: bool
    cpu_ops: int
    kernels: int
    kernel_names: dict[str, int]
    cpu_us: float
    gpu_us: float


@dataclass(frozen=True)
class StepTrace:
    """One profiled step: its ranges and the step-level counts."""

    step: str
    ranges: tuple[RangeStats, ...]
    cpu_ops: int
    kernels: int
    memcpy: int
    memset: int
    gpu_busy_us: float
    cpu_span_us: float
    kernel_names: dict[str, int] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)  # kernelcheck.trace's summary, when available


def load_events(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return list(data.get("traceEvents") or []), {k: v for k, v in data.items() if k != "traceEvents"}


def _parse_range(name: str) -> tuple[str, str, int | None, bool]:
    body = name[len(RANGE_PREFIX):]
    backward = body.endswith("::backward")
    if backward:
        body = body[: -len("::backward")]
    parts = body.split("::")
    fn, step = parts[0], parts[1] if len(parts) > 1 else "?"
    layer_s = (parts[2] if len(parts) > 2 else "L-").split("#")[0][1:]
    return fn, step, int(layer_s) if layer_s.isdigit() else None, backward


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def analyze(step: str, events: list[dict[str, Any]], metadata: dict[str, Any] | None = None) -> StepTrace:
    """Per-range and per-step counts for one profiled step."""
    xs = [e for e in events if e.get("ph") == "X"]
    cpu = [e for e in xs if e.get("cat") == "cpu_op"]
    gpu = [e for e in xs if e.get("cat") in _GPU_CATS]
    launches = {}
    for e in xs:
        if e.get("cat") in _LAUNCH_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launches[corr] = e
    ranges = [e for e in xs if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(RANGE_PREFIX)]
    # CPU ops by thread, sorted by start, for interval look-ups.
    by_tid: dict[Any, list[tuple[float, dict[str, Any]]]] = {}
    for e in cpu:
        by_tid.setdefault(e.get("tid"), []).append((float(e["ts"]), e))
    for v in by_tid.values():
        v.sort(key=lambda x: x[0])
    gpu_by_launch: dict[Any, list[tuple[float, dict[str, Any]]]] = {}
    for k in gpu:
        launch = launches.get((k.get("args") or {}).get("correlation"))
        if launch is not None:
            gpu_by_launch.setdefault(launch.get("tid"), []).append((float(launch["ts"]), k))
    for v in gpu_by_launch.values():
        v.sort(key=lambda x: x[0])
    out = []
    for r in ranges:
        t0, t1, tid = float(r["ts"]), float(r["ts"]) + float(r.get("dur", 0)), r.get("tid")
        ops = _within(by_tid.get(tid, []), t0, t1)
        ks = _within(gpu_by_launch.get(tid, []), t0, t1)
        names = Counter(k["name"] for k in ks if k.get("cat") == "kernel")
        fn, st, layer, bwd = _parse_range(r["name"])
        out.append(RangeStats(r["name"], fn, st, layer, bwd, len(ops), sum(names.values()), dict(names),
                              t1 - t0, sum(float(k.get("dur", 0)) for k in ks)))
    kernels = [e for e in gpu if e.get("cat") == "kernel"]
    span = (max(float(e["ts"]) + float(e.get("dur", 0)) for e in cpu) - min(float(e["ts"]) for e in cpu)) if cpu else 0.0
    analysis = _shared_analysis(events, metadata)
    return StepTrace(step, tuple(out), len(cpu), len(kernels),
                     sum(1 for e in gpu if e.get("cat") == "gpu_memcpy"),
                     sum(1 for e in gpu if e.get("cat") == "gpu_memset"),
                     _union_us([(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in gpu]),
                     span, dict(Counter(e["name"] for e in kernels).most_common(20)), analysis)


def _within(items: list[tuple[float, dict[str, Any]]], t0: float, t1: float) -> list[dict[str, Any]]:
    lo = bisect.bisect_left(items, t0, key=lambda x: x[0])
    hi = bisect.bisect_right(items, t1, key=lambda x: x[0])
    return [e for _, e in items[lo:hi]]


def _shared_analysis(events: list[dict[str, Any]], metadata: dict[str, Any] | None) -> dict[str, Any]:
    """kernelcheck.trace's step analysis (the `trace` command's), when that module is present."""
    try:
        from kernelcheck import trace as trace_mod  # written on the `trace` branch
    except Exception:
        return {}
    fn = getattr(trace_mod, "analyze_events", None)
    if fn is None:
        return {}
    try:
        res = fn(events, metadata)
    except Exception as exc:  # noqa: BLE001 - the attribution above stands on its own
        return {"error": f"{type(exc).__name__}: {exc}"}
    to_json = getattr(res, "to_json", None)
    if callable(to_json):
        return to_json()
    from dataclasses import asdict, is_dataclass

    return asdict(res) if is_dataclass(res) else {}


def launch_sentence(st: StepTrace, device: str) -> str:
    """Launch-bound signal in words: GPU busy vs the step's span, and kernels per step."""
    if st.analysis.get("launch_bound_sentence"):
        return str(st.analysis["launch_bound_sentence"])
    if not device.startswith("cuda"):
        return (f"{st.step}: {st.cpu_ops} CPU ops in {st.cpu_span_us / 1000:.1f} ms on the CPU; no GPU here, so "
                "there is no GPU time to compare.")
    if st.cpu_span_us <= 0 or st.kernels == 0:
        return f"{st.step}: no GPU kernels were recorded."
    busy = min(1.0, st.gpu_busy_us / st.cpu_span_us)
    idle = 1.0 - busy
    per = st.gpu_busy_us / max(1, st.kernels)
    s = (f"{st.step}: {st.kernels} GPU kernels in {st.cpu_span_us / 1000:.1f} ms; the GPU was busy "
         f"{busy:.0%} of the step")
    if idle > 0.2 and per < 20:
        s += (f" and sat idle {idle:.0%} waiting for launches (average kernel {per:.1f} us: launch-bound, the "
              "signature of a torch fallback)")
    elif idle > 0.2:
        s += f" and idle {idle:.0%} (host work or synchronisation between kernels)"
    else:
        s += " (not launch-bound)"
    return s + "."
