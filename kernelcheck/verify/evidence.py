"""Attribute a profiler trace's CPU ops and GPU kernels to kernelcheck's per-call ranges.

A call range (`kernelcheck::<function>::<step>::L<layer>#<n>`, see instrument.py) owns:
- the CPU ops recorded inside it on the same thread;
- the GPU kernels, memcpys and memsets whose launch (the `cuda_runtime`/`cuda_driver` event with the same
  `correlation` id: Triton kernels go through `cuLaunchKernelEx`, a driver call) happened inside it.
The backward of a call is its own range (`...::backward`), opened on the autograd thread.
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelcheck.core import matrix
from kernelcheck.report.live import LaunchLine
from kernelcheck.trace.results import StepStats
from kernelcheck.verify.instrument import RANGE_PREFIX

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
    """One profiled step: its per-call ranges, plus the step-level analysis of the shared trace module
    (the same numbers `kernelcheck trace` reports: ops, kernels, GPU busy vs wall time, launch delay)."""

    step: str
    ranges: tuple[RangeStats, ...]
    stats: StepStats  # of the whole step
    launch_bound: bool
    fast_packages: tuple[str, ...]  # packages whose fast kernels ran in the step (matrix/signatures.toml)
    fallbacks: tuple[str, ...]  # fallback signature ids the trace analysis matched

    @property
    def cpu_ops(self) -> int:
        return int(self.stats.cpu_ops)

    @property
    def kernels(self) -> int:
        return int(self.stats.kernels)


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


def analyze(step: str, events: list[dict[str, Any]], metadata: dict[str, Any] | None = None, *,
            m: matrix.Matrix) -> StepTrace:
    """Per-range and per-step counts for one profiled step, and the trace analysis' reading of it on the matrix
    `m`."""
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
    from kernelcheck.trace import analysis

    an = analysis.analyze_events(events, metadata, m=m)
    summary = dataclasses.replace(an.summary, name=f"the {step} step")
    return StepTrace(step, tuple(out), summary, analysis.is_launch_bound(summary, lb=m.signatures.launch_bound),
                     tuple(an.fast_packages),
                     tuple(m.id for m in an.fallbacks))


def _within(items: list[tuple[float, dict[str, Any]]], t0: float, t1: float) -> list[dict[str, Any]]:
    lo = bisect.bisect_left(items, t0, key=lambda x: x[0])
    hi = bisect.bisect_right(items, t1, key=lambda x: x[0])
    return [e for _, e in items[lo:hi]]


def fast_kernel_names(package: str, names: list[str], *, sig: matrix.TraceSignatures) -> list[str]:
    """The names among `names` that are `package`'s fast kernels (patterns from matrix/signatures.toml: `sig`, a
    Matrix's signatures)."""
    pats = sig.fast_kernels.get(package, ())
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in pats)]


def backends_seen(names: list[str], *, sig: matrix.TraceSignatures) -> list[str]:
    """The fla backends (matrix/signatures.toml [backend.*]) whose kernels are among `names`, most specific first:
    a TileLang `kernel_kernel` is TileLang, not Triton; FlashQLA's `tilelang_*_kernel_kernel` is FlashQLA. In that
    order: flash_qla, tilelang, triton. `sig`: a Matrix's signatures."""
    pats = sig.backends
    order = sorted(pats, key=lambda b: {"flash_qla": 0, "tilelang": 1}.get(b, 2))
    seen: set[str] = set()
    for n in names:
        b = next((b for b in order if any(fnmatch.fnmatchcase(n, p) for p in pats[b])), None)
        if b is not None:
            seen.add(b)
    return [b for b in order if b in seen]


def launch_line(st: StepTrace, device: str) -> LaunchLine:
    """The step's launch-bound signal (report/live_text.py says it): GPU busy vs the step's wall time, kernels per
    step, and the trace analysis' words when it is launch-bound."""
    from kernelcheck.trace import analysis

    s = st.stats
    on_gpu = device.startswith("cuda")
    return LaunchLine(st.step, on_gpu, int(s.cpu_ops), float(s.cpu_span_us), int(s.kernels), s.busy_fraction,
                      float(s.wall_us), float(s.median_kernel_us),
                      analysis.launch_bound_sentence(s) if on_gpu and st.launch_bound else None)
