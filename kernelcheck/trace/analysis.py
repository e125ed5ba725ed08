"""trace: analyse a torch profiler trace of a real step. Shared by `kernelcheck trace` and `verify`.

nvidia-smi's utilization only says that *some* kernel was running; a step made of thousands of tiny
kernels launched one by one from Python reads ~100% and still runs several times slower than the fused
kernels would. This module reads the Chrome trace that torch.profiler exports and says, per profiler step:
how many CPU ops and GPU kernels ran, how long the GPU was really busy (the union of kernel intervals),
the idle gaps, how long each kernel waited after its launch, the top kernels, and whether the step
carries the signature of transformers' torch reference path (matrix/signatures.toml) or is launch-bound.

Memory: events are streamed (kernelcheck.chrome_trace) and never kept as dicts. While reading, what is
kept is O(distinct names) strings plus, per CPU op, a float and an int (12 bytes); per GPU activity five
numbers (29 bytes); per launch call one dict entry (~100 bytes). The final aggregation adds, per CPU op,
4 bytes, and per kernel a few Python objects (~150 bytes, for the busy-time union and delay percentiles
of its step). Measured: 28 MB above the interpreter for a 402 MB trace of 1.16 M CPU ops, where
json.load needs 1.8 GB (benchmarks/trace_throughput.py, docs/trace.md).
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import operator
import os
import re
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck.core import matrix as matrix_mod
from kernelcheck.core.errors import BadInput
from kernelcheck.report.model import Finding, Report, render_findings
from kernelcheck.trace.reader import TraceReader

TOP_N = 10
# GPU activity kinds in the per-activity arrays
_KERNEL, _MEMCPY, _MEMSET = 0, 1, 2
_second = operator.itemgetter(1)
_STEP_PREFIX = "ProfilerStep#"


# ----------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class StepStats:
    """What ran in one profiler step (or in the whole trace, for TraceAnalysis.summary).

    Times are microseconds. `gpu_busy_us` is the union of kernel intervals (memcpy/memset excluded: they
    do not keep the SMs busy); `wall_us` runs from the step's start to the later of its CPU end and its
    last GPU activity; `idle_gaps` are the holes between busy intervals inside the GPU span;
    `launch_delay_us` is kernel start minus the end of the runtime/driver call that launched it (matched
    by correlation id), clamped at 0 (a kernel may start before its launch call returns).
    """

    name: str
    cpu_ops: int
    kernels: int
    memcpy: int
    memset: int
    gpu_busy_us: float
    cpu_span_us: float
    gpu_span_us: float
    wall_us: float
    idle_gaps: Mapping[str, float]  # {count, total_us, longest_us}
    launch_delay_us: Mapping[str, float]  # {p50, p90, max, count}; count 0 when no launch was matched
    median_kernel_us: float
    top_kernels_by_time: tuple[Mapping[str, Any], ...]  # ({name, total_us, count}, ...)
    top_kernels_by_count: tuple[Mapping[str, Any], ...]
    top_ops_by_count: tuple[Mapping[str, Any], ...]  # CPU ops ({name, count}, ...)
    kernel_names: tuple[str, ...]  # sorted, distinct
    kernel_counts: Mapping[str, int] = field(default_factory=dict)
    launches: int = 0  # runtime/driver launch calls seen on the CPU side

    @property
    def busy_fraction(self) -> float | None:
        """GPU busy time / wall time of the step; None without GPU activity."""
        if self.kernels == 0 or self.wall_us <= 0:
            return None
        return min(1.0, self.gpu_busy_us / self.wall_us)

    def to_json(self) -> dict[str, Any]:
        bf = self.busy_fraction
        return {
            "name": self.name, "cpu_ops": self.cpu_ops, "kernels": self.kernels, "memcpy": self.memcpy,
            "memset": self.memset, "launches": self.launches,
            "gpu_busy_us": round(self.gpu_busy_us, 3), "cpu_span_us": round(self.cpu_span_us, 3),
            "gpu_span_us": round(self.gpu_span_us, 3), "wall_us": round(self.wall_us, 3),
            "gpu_busy_fraction": None if bf is None else round(bf, 4),
            "idle_gaps": {k: _r(v) for k, v in self.idle_gaps.items()},
            "launch_delay_us": {k: _r(v) for k, v in self.launch_delay_us.items()},
            "median_kernel_us": round(self.median_kernel_us, 3),
            "top_kernels_by_time": [dict(k) for k in self.top_kernels_by_time],
            "top_kernels_by_count": [dict(k) for k in self.top_kernels_by_count],
            "top_ops_by_count": [dict(k) for k in self.top_ops_by_count],
            "distinct_kernels": len(self.kernel_names),
        }


@dataclass(frozen=True)
class SignatureMatch:
    """A fallback signature seen in some steps, with the evidence in words."""

    id: str
    package: str  # packages.toml key (fla, causal_conv1d)
    distribution: str  # what to pip install (fla-core)
    title: str  # flash-linear-attention
    functions: tuple[str, ...]
    steps: tuple[str, ...]
    evidence: str
    by_python_stack: bool


@dataclass(frozen=True)
class TraceAnalysis:
    """The analysis of one trace: whole-trace stats, per-step stats, verdict-relevant facts, findings."""

    summary: StepStats
    steps: tuple[StepStats, ...]
    findings: tuple[Finding, ...]
    cpu_only: bool
    fast_packages: tuple[str, ...]  # packages whose fast kernels ran somewhere in the trace
    fallbacks: tuple[SignatureMatch, ...]
    launch_bound_steps: tuple[str, ...]
    metadata: Mapping[str, Any]  # top-level keys of the trace (gpus, error text, ...), small
    events: int
    path: str | None = None
    bytes: int | None = None
    gzip: bool = False

    @property
    def verdict(self) -> str:
        """healthy | fallback (a torch reference path ran) | launch-bound."""
        if self.fallbacks and not self.cpu_only:
            return "fallback"
        if self.launch_bound_steps:
            return "launch-bound"
        return "healthy"

    @property
    def missing_packages(self) -> tuple[str, ...]:
        """Distributions whose absence the trace shows (pip names), in signature order."""
        return tuple(dict.fromkeys(m.distribution for m in self.fallbacks)) if not self.cpu_only else ()


# ----------------------------------------------------------------------------------------------------
# reading


def analyze_file(path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None) -> TraceAnalysis:
    """Stream a trace file (plain or gzip JSON) and analyse it. Raises BadInput for a non-trace file.

    `progress(bytes_read, total_bytes)` is called about every 16 MiB of input when given.
    """
    p = Path(path)
    reader = TraceReader(p)
    try:
        size = p.stat().st_size
    except OSError:
        size = None
    events: Iterable[dict[str, Any]] = reader.events()
    if progress is not None and size:
        events = _with_progress(events, reader, size, progress)
    acc = _Accumulator()
    acc.feed(events)
    if not reader.saw_trace_events:
        keys = ", ".join(sorted(reader.metadata)[:8]) or "none"
        raise BadInput(f"{p} is JSON but not a Chrome trace: it has no \"traceEvents\" array (top-level keys: "
                       f"{keys}). Give the file written by torch.profiler's export_chrome_trace or "
                       "tensorboard_trace_handler.")
    if not acc.has_activity():
        raise BadInput(f"{p} holds no profiled op, kernel or step ({acc.n_events} bookkeeping events only): the "
                       "profiler recorded nothing. With a schedule, export from on_trace_ready, or use repeat=1 "
                       "and export after the active steps ran: a profiler that starts a new cycle clears what it "
                       "recorded. Call prof.step() once per step, then record again.")
    return acc.finish(reader.metadata, path=str(p), size=size, gz=reader.gzip)


def analyze_events(events: Iterable[Mapping[str, Any]], metadata: Mapping[str, Any] | None = None) -> TraceAnalysis:
    """Analyse Chrome-trace event dicts (as torch's export_chrome_trace writes them) already in memory."""
    acc = _Accumulator()
    acc.feed(events)
    return acc.finish(dict(metadata or {}))


def _with_progress(events: Iterable[dict[str, Any]], reader: TraceReader, size: int,
                   progress: Callable[[int, int], None]) -> Iterable[dict[str, Any]]:
    step = 16 << 20
    nxt = step
    for i, ev in enumerate(events):
        if not i & 0x3FFF:
            b = reader.bytes_read
            if b >= nxt:
                progress(b, size)
                nxt = b + step
        yield ev
    progress(size, size)


class _Accumulator:
    """Per-event work kept minimal: classify, append a few numbers to typed arrays, intern names."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.cpu_ts = array("d")
        self.cpu_name = array("i")
        self.cpu_min = float("inf")
        self.cpu_max = float("-inf")
        self.g_ts = array("d")
        self.g_dur = array("d")
        self.g_name = array("i")
        self.g_kind = array("b")
        self.g_corr = array("q")
        self.launch_end: dict[int, float] = {}
        self.launches: list[float] = []  # launch call start times, for per-step launch counts
        self.steps: list[tuple[float, float, str]] = []
        self.py_hits: list[tuple[float, str]] = []  # (ts, python function name) matching a signature
        self.n_events = 0
        sig = matrix_mod.load_signatures()
        pats = [p for s in sig.signatures for p in s.python_functions]
        self._py_rx = re.compile("|".join(fnmatch.translate(p) for p in pats)) if pats else None
        self._py_seen: dict[str, bool] = {}

    def has_activity(self) -> bool:
        return bool(len(self.cpu_ts) or len(self.g_ts) or self.steps)

    def _intern(self, name: str) -> int:
        i = self.names.get(name)
        if i is None:
            i = self.names[name] = len(self.name_list)
            self.name_list.append(name)
        return i

    def feed(self, events: Iterable[Mapping[str, Any]]) -> None:
        names = self.names
        intern = self._intern
        cpu_ts_append, cpu_name_append = self.cpu_ts.append, self.cpu_name.append
        g_ts, g_dur, g_name, g_kind, g_corr = (self.g_ts.append, self.g_dur.append, self.g_name.append,
                                               self.g_kind.append, self.g_corr.append)
        launch_end = self.launch_end
        launches = self.launches.append
        cpu_min, cpu_max = self.cpu_min, self.cpu_max
        n = 0
        for ev in events:
            n += 1
            if ev.get("ph") != "X":
                continue
            cat = ev.get("cat")
            if cat == "cpu_op":
                ts = ev.get("ts")
                if ts is None:
                    continue
                name = ev.get("name", "?")
                i = names.get(name)
                cpu_ts_append(ts)
                cpu_name_append(i if i is not None else intern(name))
                if ts < cpu_min:
                    cpu_min = ts
                end = ts + (ev.get("dur") or 0)
                if end > cpu_max:
                    cpu_max = end
                continue
            if cat is None:
                continue
            if cat in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"):
                ts = ev.get("ts")
                if ts is None:
                    continue
                name = ev.get("name", "?")
                args = ev.get("args") or {}
                if args.get("is_user_annotation"):
                    continue
                if cat == "gpu_memcpy" or cat == "Memcpy" or name.startswith("Memcpy"):
                    kind = _MEMCPY
                elif cat == "gpu_memset" or cat == "Memset" or name.startswith("Memset"):
                    kind = _MEMSET
                else:
                    kind = _KERNEL
                i = names.get(name)
                g_ts(ts)
                g_dur(ev.get("dur") or 0.0)
                g_name(i if i is not None else intern(name))
                g_kind(kind)
                corr = args.get("correlation")
                g_corr(corr if type(corr) is int else -1)
                continue
            if cat == "cuda_runtime" or cat == "cuda_driver":
                name = ev.get("name", "")
                # Launches only: kernels (cudaLaunchKernel[ExC], cuLaunchKernel[Ex], cudaGraphLaunch),
                # copies and memsets. Synchronize/malloc calls have no GPU activity to match.
                if "aunch" in name or "emcpy" in name or "emset" in name:
                    corr = (ev.get("args") or {}).get("correlation")
                    ts = ev.get("ts")
                    if type(corr) is int and ts is not None:
                        launch_end[corr] = ts + (ev.get("dur") or 0.0)
                        if "aunch" in name:
                            launches(ts)
                continue
            if cat == "user_annotation":
                name = ev.get("name", "")
                if name.startswith(_STEP_PREFIX) and ev.get("ts") is not None:
                    ts = ev["ts"]
                    self.steps.append((ts, ts + (ev.get("dur") or 0.0), name))
                continue
            if cat == "python_function" and self._py_rx is not None:
                name = ev.get("name", "")
                hit = self._py_seen.get(name)
                if hit is None:
                    hit = self._py_seen[name] = bool(self._py_rx.match(name))
                if hit and ev.get("ts") is not None:
                    self.py_hits.append((ev["ts"], name))
        self.n_events += n
        self.cpu_min, self.cpu_max = cpu_min, cpu_max

    # -- aggregation ----------------------------------------------------------------------------------
    def finish(self, metadata: dict[str, Any], path: str | None = None, size: int | None = None,
               gz: bool = False) -> TraceAnalysis:
        steps = sorted(self.steps)
        n_steps = len(steps)
        starts = [s[0] for s in steps]

        def step_of(t: float) -> int:
            k = bisect.bisect_right(starts, t) - 1
            if k >= 0 and t <= steps[k][1]:
                return k
            return -1

        # CPU ops per step: one step index per op (4 bytes), found by bisection only when the op leaves the
        # previous op's step (ops come mostly in time order); then counts per (step, name) in C.
        cpu_counts = [0] * n_steps
        cpu_names: list[Counter[int]] = [Counter() for _ in range(n_steps)]
        if n_steps:
            kidx = array("i")
            put = kidx.append
            k, s0, s1 = -1, 1.0, 0.0  # an empty window: the first op looks its step up
            for t in self.cpu_ts:
                if not s0 <= t <= s1:
                    k = bisect.bisect_right(starts, t) - 1
                    if k >= 0 and t <= steps[k][1]:
                        s0, s1 = steps[k][0], steps[k][1]
                    else:
                        k, s0, s1 = -1, 1.0, 0.0
                put(k)
            for (k, ni), c in Counter(zip(kidx, self.cpu_name)).items():
                if k >= 0:
                    cpu_counts[k] += c
                    cpu_names[k][ni] = c
            del kidx
        all_cpu_names: Counter[int] = Counter(self.cpu_name)

        # GPU activities: assign each to the step whose CPU side launched it (the launch call's end),
        # else to the step whose window holds its start.
        launch_end = self.launch_end
        g_step = array("i")
        delays = array("d")
        delay_idx = array("i")
        for idx in range(len(self.g_ts)):
            ts = self.g_ts[idx]
            le = launch_end.get(self.g_corr[idx]) if self.g_corr[idx] >= 0 else None
            if le is not None and self.g_kind[idx] == _KERNEL:
                delays.append(max(0.0, ts - le))
                delay_idx.append(idx)
            g_step.append(step_of(le if le is not None else ts) if n_steps else -1)
        delay_of: dict[int, float] = dict(zip(delay_idx, delays))

        launches_per_step = [0] * n_steps
        if n_steps:
            for t in self.launches:
                k = step_of(t)
                if k >= 0:
                    launches_per_step[k] += 1

        all_idx = range(len(self.g_ts))
        summary_window = self._summary_window(steps)
        summary = self._stats("trace", all_idx, all_cpu_names, len(self.cpu_ts), summary_window, delay_of,
                              len(self.launches), cpu_span=self._cpu_span())
        step_stats = []
        by_step: list[list[int]] = [[] for _ in range(n_steps)]
        for idx, k in enumerate(g_step):
            if k >= 0:
                by_step[k].append(idx)
        for k, (s0, s1, name) in enumerate(steps):
            step_stats.append(self._stats(name, by_step[k], cpu_names[k], cpu_counts[k], (s0, s1), delay_of,
                                          launches_per_step[k], cpu_span=s1 - s0))
        py_by_step: list[set[str]] = [set() for _ in range(n_steps)]
        py_all = {name for _, name in self.py_hits}
        for t, name in self.py_hits:
            k = step_of(t) if n_steps else -1
            if k >= 0:
                py_by_step[k].add(name)
        return _judge(summary, tuple(step_stats), py_all, py_by_step, metadata, self.n_events, path, size, gz)

    def _cpu_span(self) -> float:
        return self.cpu_max - self.cpu_min if self.cpu_max > self.cpu_min else 0.0

    def _summary_window(self, steps: list[tuple[float, float, str]]) -> tuple[float, float] | None:
        lo, hi = self.cpu_min, self.cpu_max
        if steps:
            lo, hi = min(lo, steps[0][0]), max(hi, max(s[1] for s in steps))
        return (lo, hi) if hi > lo else None

    def _stats(self, name: str, idxs: Iterable[int], cpu_names: Counter[int], cpu_ops: int,
               window: tuple[float, float] | None, delay_of: dict[int, float], launches: int,
               cpu_span: float) -> StepStats:
        g_ts, g_dur, g_kind, g_name = self.g_ts, self.g_dur, self.g_kind, self.g_name
        intervals: list[tuple[float, float]] = []
        kdurs: list[float] = []
        kdelays: list[float] = []
        kcount: Counter[int] = Counter()
        ktime: dict[int, float] = {}
        memcpy = memset = 0
        gpu_lo: float
        gpu_hi: float
        gpu_lo, gpu_hi = float("inf"), float("-inf")
        for i in idxs:
            t, d, kind = g_ts[i], g_dur[i], g_kind[i]
            if t < gpu_lo:
                gpu_lo = t
            if t + d > gpu_hi:
                gpu_hi = t + d
            if kind == _MEMCPY:
                memcpy += 1
                continue
            if kind == _MEMSET:
                memset += 1
                continue
            intervals.append((t, t + d))
            kdurs.append(d)
            ni = g_name[i]
            kcount[ni] += 1
            ktime[ni] = ktime.get(ni, 0.0) + d
            dl = delay_of.get(i)
            if dl is not None:
                kdelays.append(dl)
        busy, gaps = _union(intervals)
        gpu_span = (gpu_hi - gpu_lo) if gpu_hi > gpu_lo else 0.0
        if window is not None:
            lo, hi = window
            if gpu_hi > gpu_lo:
                lo, hi = min(lo, gpu_lo), max(hi, gpu_hi)
            wall = hi - lo
        else:
            wall = gpu_span
        nl = self.name_list
        by_time = tuple({"name": nl[n], "total_us": round(t, 3), "count": kcount[n]}
                        for n, t in sorted(ktime.items(), key=lambda kv: (-kv[1], nl[kv[0]]))[:TOP_N])
        by_count = tuple({"name": nl[n], "count": c, "total_us": round(ktime[n], 3)}
                         for n, c in sorted(kcount.items(), key=lambda kv: (-kv[1], nl[kv[0]]))[:TOP_N])
        ops = tuple({"name": nl[n], "count": c}
                    for n, c in sorted(cpu_names.items(), key=lambda kv: (-kv[1], nl[kv[0]]))[:TOP_N])
        return StepStats(
            name=name, cpu_ops=cpu_ops, kernels=len(intervals), memcpy=memcpy, memset=memset,
            gpu_busy_us=busy, cpu_span_us=cpu_span, gpu_span_us=gpu_span, wall_us=max(wall, 0.0),
            idle_gaps=gaps, launch_delay_us=_percentiles(kdelays), median_kernel_us=_median(kdurs),
            top_kernels_by_time=by_time, top_kernels_by_count=by_count, top_ops_by_count=ops,
            kernel_names=tuple(sorted(nl[n] for n in kcount)),
            kernel_counts={nl[n]: c for n, c in kcount.items()}, launches=launches,
        )


def _union(intervals: list[tuple[float, float]]) -> tuple[float, dict[str, float]]:
    """Busy time (length of the union of intervals) and the gaps between the merged intervals."""
    if not intervals:
        return 0.0, {"count": 0, "total_us": 0.0, "longest_us": 0.0}
    intervals.sort()
    busy = 0.0
    gaps = 0
    gap_total = 0.0
    longest = 0.0
    cur_s, cur_e = intervals[0]
    for s, e in intervals[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            g = s - cur_e
            gaps += 1
            gap_total += g
            if g > longest:
                longest = g
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    busy += cur_e - cur_s
    return busy, {"count": gaps, "total_us": gap_total, "longest_us": longest}


def _median(xs: list[float]) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _percentiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"p50": 0.0, "p90": 0.0, "max": 0.0, "count": 0}
    xs = sorted(xs)
    n = len(xs)

    def pct(q: float) -> float:  # nearest-rank
        return xs[min(n - 1, max(0, int(round(q * n + 0.5)) - 1))]

    return {"p50": pct(0.5), "p90": pct(0.9), "max": xs[-1], "count": n}


def _r(v: float) -> float | int:
    return v if isinstance(v, int) else round(v, 3)


# ----------------------------------------------------------------------------------------------------
# verdicts


@functools.lru_cache(maxsize=256)
def _compile(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex for a tuple of fnmatch globs (cached: the same tuples are matched for every step)."""
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)) if patterns else None


def _count_matching(counts: Mapping[str, int], rx: re.Pattern[str] | None) -> tuple[int, list[str]]:
    if rx is None:
        return 0, []
    hits = [(n, c) for n, c in counts.items() if rx.match(n)]
    hits.sort(key=lambda nc: -nc[1])
    return sum(c for _, c in hits), [n for n, _ in hits]


def fast_kernels_in(step: StepStats) -> dict[str, list[str]]:
    """Packages whose fast kernels ran in `step`: {package key: [kernel names]}."""
    sig = matrix_mod.load_signatures()
    out: dict[str, list[str]] = {}
    for pkg, pats in sig.fast_kernels.items():
        _, names = _count_matching(step.kernel_counts, _compile(pats))
        if names:
            out[pkg] = names
    return out


def _match_signature(s: matrix_mod.Signature, step: StepStats, py_names: set[str],
                     fast: dict[str, list[str]], matched: set[str]) -> tuple[str, bool] | None:
    """(evidence in words, by_python_stack) when `s` matches the step, else None."""
    if s.package in fast:
        return None
    if s.context_packages and not any(c in fast or c in matched for c in s.context_packages):
        return None
    rx = _compile(s.python_functions)
    py = sorted(n for n in py_names if rx is not None and rx.match(n))
    if py:
        fn = py[0].rsplit(": ", 1)[-1]
        return f"the Python stack shows `{fn}` ({py[0].rsplit(': ', 1)[0]})", True
    if not s.kernels or step.kernels == 0:
        return None
    parts = []
    for g in s.kernels:
        n, names = _count_matching(step.kernel_counts, _compile(g.patterns))
        if n < g.min:
            return None
        parts.append(f"{g.what}: {n:,} ({_short(names[0])}{', ...' if len(names) > 1 else ''})")
    return "; ".join(parts), False


def launch_bound_sentence(step: StepStats) -> str:
    """The sentence a user reads, e.g. 'the GPU sat idle 42% of ProfilerStep#2 waiting for launches ...'."""
    bf = step.busy_fraction
    where = "the trace" if step.name == "trace" else step.name
    if bf is None:
        return f"no GPU kernel ran in {where}"
    idle = 1.0 - bf
    d = step.launch_delay_us
    s = (f"the GPU sat idle {idle:.0%} of {where} waiting for launches: {step.kernels:,} kernels of median "
         f"{step.median_kernel_us:.1f} us each, busy {_ms(step.gpu_busy_us)} of {_ms(step.wall_us)}")
    if d.get("count"):
        s += f"; each kernel started {d['p50']:.1f} us (median) after its launch returned, so the queue was empty"
    return s


def is_launch_bound(step: StepStats, lb: matrix_mod.LaunchBound | None = None) -> bool:
    """Low GPU busy fraction with many short kernels that start as soon as they are launched."""
    lb = lb or matrix_mod.load_signatures().launch_bound
    bf = step.busy_fraction
    if bf is None or step.kernels < lb.min_kernels:
        return False
    if bf >= lb.busy_fraction_below or step.median_kernel_us >= lb.median_kernel_us_below:
        return False
    d = step.launch_delay_us
    if d.get("count") and d["p50"] >= lb.launch_delay_p50_below_us:
        return False  # the queue was full: idle time comes from elsewhere (syncs, copies)
    return True


def _judge(summary: StepStats, steps: tuple[StepStats, ...], py_all: set[str], py_by_step: list[set[str]],
           metadata: dict[str, Any], n_events: int, path: str | None, size: int | None, gz: bool) -> TraceAnalysis:
    sig = matrix_mod.load_signatures()
    pk = matrix_mod.load().packages
    findings: list[Finding] = []
    cpu_only = summary.kernels == 0 and summary.memcpy == 0 and summary.memset == 0
    units = list(zip(steps, py_by_step)) if steps else [(summary, py_all)]
    meta_small = _metadata_summary(metadata)

    if cpu_only:
        why = "no GPU kernel, copy or memset was recorded"
        if meta_small.get("error"):
            why += f" (the profiler noted: {meta_small['error']})"
        elif not meta_small.get("gpus"):
            why += " and the trace lists no GPU"
        findings.append(Finding(
            "trace-cpu-only", "info",
            f"CPU-only trace: {why}. Counts and spans of CPU ops are shown; GPU busy time, launch delays and "
            "kernel signatures need a trace recorded on the GPU with ProfilerActivity.CUDA.",
            "record on the GPU machine: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
            "ProfilerActivity.CUDA], schedule=...)", "FACTS.md section 7"))

    # fast kernels anywhere
    fast_any: dict[str, list[str]] = fast_kernels_in(summary)
    for pkg_key, names in fast_any.items():
        title = pk[pkg_key].title if pkg_key in pk else pkg_key
        n = sum(summary.kernel_counts[nm] for nm in names)
        findings.append(Finding(
            f"{pkg_key.replace('_', '-')}-kernels-ran", "info",
            f"{title} kernels ran: {n:,} launches of {len(names)} kernels ({', '.join(_short(x) for x in names[:4])}"
            f"{', ...' if len(names) > 4 else ''}).", None, sig.fast_references.get(pkg_key) or None))

    # fallback signatures, per step
    matches: list[SignatureMatch] = []
    for s in sig.signatures:
        hit_steps: list[str] = []
        evidence = ""
        by_py = False
        for st, py in units:
            fast = fast_kernels_in(st)
            matched_pkgs = {m.package for m in matches if st.name in m.steps}
            r = _match_signature(s, st, py, fast, matched_pkgs)
            if r is not None:
                hit_steps.append(st.name)
                if not evidence:
                    evidence, by_py = r
        if not hit_steps:
            continue
        pinfo = pk.get(s.package)
        dist = pinfo.install_distribution if pinfo else s.package
        title = pinfo.title if pinfo else s.package
        matches.append(SignatureMatch(s.id, s.package, dist, title, s.functions, tuple(hit_steps), evidence, by_py))
    for m in matches:
        s = next(x for x in sig.signatures if x.id == m.id)
        where = _where(m.steps, len(units), bool(steps))
        examples = sig.fast_examples.get(m.package) or sig.fast_kernels.get(m.package, ())[:3]
        named = m.title if m.title == m.distribution else f"{m.title} ({m.distribution})"
        if cpu_only:
            findings.append(Finding(
                m.id, "info",
                f"{s.title} {where}: {m.evidence}. On CPU this is the only path ({m.title} kernels run only on "
                "GPUs); on the GPU the same trace would mean a slow fallback.", None, s.reference, m.functions))
            continue
        findings.append(Finding(
            m.id, "fallback",
            f"{s.title} {where} ({s.what}). Evidence: {m.evidence}; no {m.title} kernel ran. Likely missing: "
            f"{named}, so transformers used its torch reference for {' / '.join(m.functions)}.",
            f"pip install {m.distribution} into the job's environment (kernelcheck install --model M picks a build "
            f"for your torch/CUDA without touching torch), restart the process and record again: the trace should "
            f"then show {', '.join(examples)}. Check first with `kernelcheck doctor --model M`.",
            s.reference, m.functions))

    # launch-bound steps
    lb_steps = [st for st, _ in units if is_launch_bound(st, sig.launch_bound)]
    if lb_steps:
        worst = min(lb_steps, key=lambda st: st.busy_fraction or 0.0)
        where = _where(tuple(st.name for st in lb_steps), len(units), bool(steps))
        cause = (" The kernel count points at the fallback above: fused kernels would launch a few dozen."
                 if matches and not cpu_only else
                 " Fewer, larger kernels (fused kernels, torch.compile, CUDA graphs, a larger batch) keep it busy.")
        findings.append(Finding(
            "launch-bound", "fallback",
            f"launch-bound {where}: {launch_bound_sentence(worst)}. nvidia-smi's utilization only says that some "
            f"kernel was running, not that the GPU was doing useful work, so it does not show this.{cause}",
            None, sig.launch_bound.reference))
    elif not cpu_only:
        bf = [st.busy_fraction for st, _ in units if st.busy_fraction is not None]
        if bf:
            findings.append(Finding(
                "gpu-busy", "info",
                f"GPU busy {min(bf):.0%}" + (f"-{max(bf):.0%}" if max(bf) - min(bf) >= 0.005 else "")
                + f" of the {'step' if steps else 'trace'} wall time; not launch-bound."))

    if not steps:
        findings.append(Finding("trace-no-steps", "info",
                                "no ProfilerStep#N in the trace: the whole trace is analysed as one step. Call "
                                "prof.step() once per training/inference step to get per-step numbers."))
    return TraceAnalysis(
        summary=summary, steps=steps, findings=tuple(findings), cpu_only=cpu_only,
        fast_packages=tuple(fast_any), fallbacks=tuple(matches),
        launch_bound_steps=tuple(st.name for st in lb_steps), metadata=meta_small, events=n_events,
        path=path, bytes=size, gzip=gz,
    )


def _where(names: tuple[str, ...], total: int, have_steps: bool) -> str:
    if not have_steps:
        return "in the trace"
    if len(names) == total:
        return f"in all {total} steps" if total > 1 else f"in {names[0]}"
    return f"in {len(names)} of {total} steps ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"


def _metadata_summary(md: Mapping[str, Any]) -> dict[str, Any]:
    """The small, useful part of the trace's top-level keys (the GPU it ran on, a profiler error)."""
    out: dict[str, Any] = {}
    gpus = []
    for d in md.get("deviceProperties") or []:
        if isinstance(d, dict):
            cap = f"{d.get('computeMajor', '?')}.{d.get('computeMinor', '?')}"
            gpus.append({"name": d.get("name"), "capability": cap})
    out["gpus"] = gpus
    err = md.get("ERROR") or md.get("error")
    if err:
        out["error"] = str(err)[:300]
    for k in ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "with_stack", "trace_id"):
        if k in md and isinstance(md[k], (str, int, float, bool)):
            out[k] = md[k]
    if isinstance(md.get("distributedInfo"), dict):
        di = md["distributedInfo"]
        out["rank"] = di.get("rank")
        out["world_size"] = di.get("world_size")
    return out


# ----------------------------------------------------------------------------------------------------
# report and text


def trace_report(path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None) -> Report:
    """Analyse the trace at `path` into a Report (command "trace"): summary, steps, findings, verdict."""
    a = analyze_file(path, progress)
    return report_of(a)


def report_of(a: TraceAnalysis) -> Report:
    """The Report for an analysis: `summary` and `steps` as in DESIGN.md, `trace` (file, GPUs, verdict)."""
    r = Report("trace", {}, None, None)
    r.findings.extend(a.findings)
    r.extra["trace"] = {
        "file": a.path, "bytes": a.bytes, "gzip": a.gzip, "events": a.events, "cpu_only": a.cpu_only,
        "gpus": a.metadata.get("gpus", []), "profiler_error": a.metadata.get("error"),
        "diagnosis": a.verdict, "missing_packages": list(a.missing_packages),
        "fast_packages": list(a.fast_packages), "launch_bound_steps": list(a.launch_bound_steps),
        "fallback_signatures": [{"id": m.id, "package": m.distribution, "functions": list(m.functions),
                                 "steps": list(m.steps), "evidence": m.evidence} for m in a.fallbacks],
    }
    r.extra["summary"] = a.summary.to_json()
    r.extra["steps"] = [s.to_json() for s in a.steps]
    return r


def _ms(us: float) -> str:
    if us >= 1000:
        return f"{us / 1000:,.1f} ms"
    return f"{us:,.0f} us"


_SHORT_RX = re.compile(r"^(void |__global__ )")


def _short(name: str, width: int = 60) -> str:
    """A kernel name a person can read: no 'void', no template arguments or parameter list."""
    s = _SHORT_RX.sub("", name)
    cut = len(s)
    for ch in "<(":
        i = s.find(ch)
        if 0 < i < cut:
            cut = i
    s = s[:cut] + ("<...>" if cut < len(s) and s[cut] == "<" else "")
    return s if len(s) <= width else s[: width - 3] + "..."




def render_text(report: Report) -> str:
    """The ten-second read: what was in the trace, one line per step, top kernels, findings, verdict."""
    t = report.extra.get("trace", {})
    s = report.extra.get("summary", {})
    steps = report.extra.get("steps", [])
    out: list[str] = []
    size = t.get("bytes")
    gpus = ", ".join(f"{g['name']} (sm_{g['capability'].replace('.', '')})" for g in t.get("gpus") or []) or "no GPU listed"
    out.append(f"kernelcheck trace · {t.get('file')} · {(size or 0) / 1e6:,.1f} MB{' gzip' if t.get('gzip') else ''} · "
               f"{t.get('events', 0):,} events · {gpus}")
    head = f"  {'step':<18} {'CPU ops':>9} {'kernels':>8} {'cpy/set':>8} {'CPU span':>10} {'GPU busy':>16} " \
           f"{'idle gaps':>18} {'launch delay p50/p90':>21}"
    out.append(head)
    shown = _steps_to_show(steps)
    for row in shown:
        out.append("  " + _row(row))
    if len(shown) < len(steps):
        out.append(f"  ... {len(steps) - len(shown):,} more steps not shown (first, last and the least GPU-busy or "
                   "longest are); --json lists all")
    out.append("  " + _row(s))
    if not t.get("cpu_only"):
        for key, label in (("top_kernels_by_time", "top kernels by time"), ("top_kernels_by_count", "top kernels by count")):
            items = s.get(key) or []
            if items:
                out.append(f"{label} (whole trace)")
                for k in items[:5]:
                    out.append(f"  {k['count']:>7,} x  {_ms(k['total_us']):>10}  {_short(k['name'], 90)}")
    else:
        ops = s.get("top_ops_by_count") or []
        if ops:
            out.append("top CPU ops by count (whole trace)")
            out.append("  " + ", ".join(f"{o['name']} {o['count']:,}" for o in ops[:6]))
    out.extend(render_findings(report.findings, width=5, references=False))
    diag = t.get("diagnosis")
    if diag == "fallback":
        words = f"FALLBACK: a torch reference path ran; likely missing: {', '.join(t.get('missing_packages') or [])}"
    elif diag == "launch-bound":
        words = "LAUNCH-BOUND: the GPU waited for the CPU to launch many small kernels"
    elif t.get("cpu_only"):
        words = "HEALTHY as far as a CPU-only trace can tell (no GPU activity recorded)"
    else:
        words = "HEALTHY: no fallback signature, the GPU was kept busy"
    out.append(f"verdict: {words} (exit {report.exit_code})")
    return "\n".join(out)


MAX_STEP_ROWS = 8


def _steps_to_show(steps: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """All steps when few; else the first two, the last two and the four that matter most, in order."""
    if len(steps) <= MAX_STEP_ROWS:
        return list(steps)
    keep = {0, 1, len(steps) - 2, len(steps) - 1}

    def badness(i: int) -> float:
        bf = steps[i].get("gpu_busy_fraction")
        return -bf if bf is not None else steps[i]["cpu_span_us"]

    keep.update(sorted(range(len(steps)), key=badness, reverse=True)[: MAX_STEP_ROWS - len(keep)])
    return [steps[i] for i in sorted(keep)]


def _row(st: Mapping[str, Any]) -> str:
    name = "whole trace" if st["name"] == "trace" else st["name"]
    bf = st.get("gpu_busy_fraction")
    busy = "-" if bf is None else f"{_ms(st['gpu_busy_us'])} ({bf:.0%})"
    g = st["idle_gaps"]
    gaps = "-" if not st["kernels"] else f"{g['count']:,} · {_ms(g['total_us'])}"
    d = st["launch_delay_us"]
    delay = "-" if not d.get("count") else f"{d['p50']:.1f} / {d['p90']:.1f} us"
    cs = f"{st['memcpy']}/{st['memset']}"
    return (f"{name:<18} {st['cpu_ops']:>9,} {st['kernels']:>8,} {cs:>8} {_ms(st['cpu_span_us']):>10} {busy:>16} "
            f"{gaps:>18} {delay:>21}")


def progress_to_stderr(done: int, total: int) -> None:
    """Progress for big traces, on stderr so --json stays clean."""
    if total >= 32 << 20:
        sys.stderr.write(f"\rreading trace: {done / 1e6:,.0f} / {total / 1e6:,.0f} MB")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

