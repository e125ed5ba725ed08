"""trace: analyse a torch profiler trace of a real step. Shared by `kernelcheck trace` and `verify`.

nvidia-smi's utilization only says that *some* kernel was running; a step made of thousands of tiny
kernels launched one by one from Python reads ~100% and still runs several times slower than the fused
kernels would. This module reads the Chrome trace that torch.profiler exports and says, per profiler step:
how many CPU ops and GPU kernels ran, how long the GPU was really busy (the union of kernel intervals),
the idle gaps, how long each kernel waited after its launch, the top kernels, and whether the step
carries the signature of transformers' torch reference path (matrix/signatures.toml) or is launch-bound.

Memory: events are streamed (kernelcheck.chrome_trace) and never kept as dicts. While reading, what is
kept is O(distinct names) strings plus, per CPU op, a float and an int (12 bytes); per GPU activity five
numbers (29 bytes); per launch call one dict entry (~100 bytes). The final aggregation (trace/aggregate.py)
adds, per CPU op, 1 byte (4 when the ops are not in time order), and per kernel a few Python objects (~150
bytes, for the busy-time union and delay percentiles of its step). Measured: 28 MB above the interpreter
for a 402 MB trace of 1.16 M CPU ops, where json.load needs 1.8 GB (benchmarks/trace_throughput.py,
docs/trace.md).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import operator
import os
import re
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.report.model import Report
from kernelcheck.report.trace import Annotated
from kernelcheck.trace import aggregate
from kernelcheck.trace import phases as phases_mod
from kernelcheck.trace.fastfeed import KERNEL, MEMCPY, MEMSET, FastFeed
from kernelcheck.trace.reader import TraceReader, gc_paused
from kernelcheck.trace.render import progress_to_stderr, render_text, report_of
from kernelcheck.trace.results import BudgetFeed, SignatureMatch, StepStats, TraceAnalysis
from kernelcheck.trace.verdicts import fast_kernels_in, is_launch_bound, judge, launch_bound_sentence

__all__ = ["SignatureMatch", "StepStats", "TraceAnalysis", "analyze_events", "analyze_file", "fast_kernels_in",
           "is_launch_bound", "launch_bound_sentence", "progress_to_stderr", "render_text", "report_of",
           "trace_report"]

TOP_N = 10
# GPU activity kinds in the per-activity arrays
_KERNEL, _MEMCPY, _MEMSET = KERNEL, MEMCPY, MEMSET
_second = operator.itemgetter(1)
_STEP_PREFIX = "ProfilerStep#"
_NUM = (int, float)



# ----------------------------------------------------------------------------------------------------
# reading


def analyze_file(path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None, *,
                 m: matrix.Matrix, budget: BudgetFeed | None = None) -> TraceAnalysis:
    """Stream a trace file (plain or gzip JSON) and analyse it on the matrix `m` (its signatures and packages).
    Raises BadInput for a non-trace file. `budget`: also gather a step budget's data in the same pass (its
    per-step classes land in the analysis' `budget`).

    `progress(bytes_read, total_bytes)` is called about every 16 MiB of input when given.
    """
    p = Path(path)
    reader = TraceReader(p)
    try:
        size = p.stat().st_size
    except OSError:
        size = None
    acc = _Accumulator(m, budget)
    phases = phases_mod.PhaseCollector()
    tick = _progress_ticks(size, progress) if progress is not None and size else None
    _guarded(p, lambda: reader.scan(lambda xs, n: acc.feed_fast(xs, n, phases),
                                    lambda evs: acc.feed(phases.passing(evs)), tick))
    if progress is not None and size:
        progress(size, size)
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
    an = _guarded(p, lambda: acc.finish(reader.metadata, path=str(p), size=size, gz=reader.gzip))
    return dataclasses.replace(an, breakdown=phases.result())


_HOSTILE = (TypeError, AttributeError, ValueError, KeyError, OverflowError, RecursionError, zlib.error)


_T = TypeVar("_T")


def _guarded(p: Path | None, fn: Callable[[], _T]) -> _T:
    """Run a reading/aggregation step; a value of the wrong type deep in a hostile file is bad input (exit 2)."""
    try:
        return fn()
    except _HOSTILE as exc:
        where = str(p) if p is not None else "the trace"
        raise BadInput(f"{where} is not a readable Chrome trace: an event has a value kernelcheck cannot use "
                       f"({type(exc).__name__}: {str(exc)[:200]}). kernelcheck trace reads the JSON that "
                       "torch.profiler writes (prof.export_chrome_trace('trace.json'), plain or .gz).") from None


def analyze_events(events: Iterable[Mapping[str, Any]], metadata: Mapping[str, Any] | None = None, *,
                   m: matrix.Matrix) -> TraceAnalysis:
    """Analyse Chrome-trace event dicts (as torch's export_chrome_trace writes them) already in memory, on the
    matrix `m`."""
    acc = _Accumulator(m)
    phases = phases_mod.PhaseCollector()
    _guarded(None, lambda: acc.feed(phases.passing(events)))
    an = _guarded(None, lambda: acc.finish(dict(metadata or {})))
    return dataclasses.replace(an, breakdown=phases.result())


def _progress_ticks(size: int, progress: Callable[[int, int], None]) -> Callable[[int], None]:
    """progress(bytes read, size) about every 16 MiB of input."""
    step = 16 << 20
    nxt = [step]

    def tick(b: int) -> None:
        if b >= nxt[0]:
            progress(b, size)
            nxt[0] = b + step

    return tick


class _Accumulator(FastFeed):
    """Per-event work kept minimal: classify, append a few numbers to typed arrays, intern names."""

    def __init__(self, m: matrix.Matrix, budget: BudgetFeed | None = None) -> None:
        self.m = m  # the matrix the verdict reads (finish)
        self.budget = budget  # a step budget's collector (budget/collect.py), fed in the same pass
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
        self.n_malformed = 0  # events skipped for a field of the wrong type (reported: nothing is dropped silently)
        sig = m.signatures
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
        """Classify each event. CPU ops (most of a trace) stay inline; the rest go to a handler per
        category. A field of the wrong type (a string `ts`, a numeric `name`) skips the event: a trace
        viewer ignores such events too, and a hostile file must not crash the reader."""
        names, intern = self.names, self._intern
        cpu_ts_append, cpu_name_append = self.cpu_ts.append, self.cpu_name.append
        handlers = self._handler_table
        cpu_min, cpu_max = self.cpu_min, self.cpu_max
        bud = self.budget
        n = 0
        for ev in events:
            n += 1
            if ev.get("ph") != "X":
                continue
            cat = ev.get("cat")
            if cat == "cpu_op":
                ts, name, dur = ev.get("ts"), ev.get("name", "?"), ev.get("dur") or 0
                if not isinstance(ts, _NUM) or not isinstance(name, str) or not isinstance(dur, _NUM):
                    self.n_malformed += 1
                    continue
                i = names.get(name)
                cpu_ts_append(ts)
                cpu_name_append(i if i is not None else intern(name))
                cpu_min = min(cpu_min, ts)
                cpu_max = max(cpu_max, ts + dur)
                if bud is not None:
                    bud.cpu_range(name, ts, ts + dur)
                continue
            handler = handlers.get(cat) if type(cat) is str else None
            if handler is not None:
                ts, name, dur, args = ev.get("ts"), ev.get("name", ""), ev.get("dur") or 0.0, ev.get("args") or {}
                if isinstance(ts, _NUM) and isinstance(name, str) and isinstance(dur, _NUM) and isinstance(args, dict):
                    handler(str(cat), ts, name, dur, args)
                else:
                    self.n_malformed += 1
        self.n_events += n
        self.cpu_min, self.cpu_max = cpu_min, cpu_max

    @cached_property
    def _handler_table(self) -> dict[str, Callable[[str, float, str, float, dict[str, Any]], None]]:
        return self._handlers

    @property
    def _handlers(self) -> dict[str, Callable[[str, float, str, float, dict[str, Any]], None]]:
        gpu, launch = self._gpu, self._launch
        kinds = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")
        out: dict[str, Callable[[str, float, str, float, dict[str, Any]], None]] = {c: gpu for c in kinds}
        out.update({"cuda_runtime": launch, "cuda_driver": launch, "user_annotation": self._annotation})
        if self._py_rx is not None:
            out["python_function"] = self._python
        return out

    def _gpu(self, cat: str, ts: float, name: str, dur: float, args: dict[str, Any]) -> None:
        if args.get("is_user_annotation"):
            return
        if cat in ("gpu_memcpy", "Memcpy") or name.startswith("Memcpy"):
            kind = _MEMCPY
        elif cat in ("gpu_memset", "Memset") or name.startswith("Memset"):
            kind = _MEMSET
        else:
            kind = _KERNEL
        i = self.names.get(name)
        self.g_ts.append(ts)
        self.g_dur.append(dur)
        self.g_name.append(i if i is not None else self._intern(name))
        self.g_kind.append(kind)
        corr = args.get("correlation")
        self.g_corr.append(corr if type(corr) is int and -(2**63) <= corr < 2**63 else -1)

    def _launch(self, cat: str, ts: float, name: str, dur: float, args: dict[str, Any]) -> None:
        # Launches only: kernels (cudaLaunchKernel[ExC], cuLaunchKernel[Ex], cudaGraphLaunch), copies and
        # memsets. Synchronize/malloc calls have no GPU activity to match.
        if self.budget is not None and "ynchronize" in name:
            self.budget.sync(ts, ts + dur)
        if "aunch" in name or "emcpy" in name or "emset" in name:
            corr = args.get("correlation")
            if type(corr) is int:
                self.launch_end[corr] = ts + dur
                if "aunch" in name:
                    self.launches.append(ts)

    def _annotation(self, cat: str, ts: float, name: str, dur: float, args: dict[str, Any]) -> None:
        if name.startswith(_STEP_PREFIX):
            self.steps.append((ts, ts + dur, name))
        elif self.budget is not None:
            self.budget.cpu_range(name, ts, ts + dur)

    def _python(self, cat: str, ts: float, name: str, dur: float, args: dict[str, Any]) -> None:
        hit = self._py_seen.get(name)
        if hit is None:
            hit = self._py_seen[name] = bool(self._py_rx.match(name))  # type: ignore[union-attr]
        if hit:
            self.py_hits.append((ts, name))

    # -- aggregation ----------------------------------------------------------------------------------
    def finish(self, metadata: dict[str, Any], path: str | None = None, size: int | None = None,
               gz: bool = False) -> TraceAnalysis:
        """The whole trace's and each step's stats, over the columns at once (trace/aggregate.py)."""
        with gc_paused():
            return self._finish(metadata, path, size, gz)

    def _finish(self, metadata: dict[str, Any], path: str | None, size: int | None, gz: bool) -> TraceAnalysis:
        self._check_finite()
        steps = sorted(self.steps)
        n_steps = len(steps)
        step_of = aggregate.step_of_fn(steps)
        cpu_counts, cpu_names, all_cpu_names = aggregate.cpu_per_step(self.cpu_ts, self.cpu_name, steps)
        gpu = aggregate.GpuSteps(self.g_ts, self.g_corr, self.g_kind, self.launch_end, steps)
        launches_per_step = aggregate.count_per_step(self.launches, steps)

        all_idx = [(0, len(self.g_ts))]
        summary_window = self._summary_window(steps)
        summary = self._stats("trace", all_idx, all_cpu_names, len(self.cpu_ts), summary_window, gpu,
                              len(self.launches), cpu_span=self._whole_span(steps))
        step_stats = []
        for k, (s0, s1, name) in enumerate(steps):
            step_stats.append(self._stats(name, gpu.by_step[k], cpu_names[k], cpu_counts[k], (s0, s1), gpu,
                                          launches_per_step[k], cpu_span=s1 - s0))
        py_all = {name for _, name in self.py_hits}
        py_by_step = self._python_per_step(step_of, n_steps)
        an = judge(summary, tuple(step_stats), py_all, py_by_step, metadata, self.n_events, path, size, gz,
                   malformed=self.n_malformed, m=self.m)
        if self.budget is None:
            return an
        raw = self.budget.steps(steps, gpu.by_step, self.g_ts, self.g_dur, self.g_name, self.g_corr,
                                self.launch_end, self.name_list)
        return dataclasses.replace(an, budget=tuple(raw))

    def _python_per_step(self, step_of: Callable[[float], int], n_steps: int) -> list[set[str]]:
        """The torch-path Python functions seen in each step."""
        py_by_step: list[set[str]] = [set() for _ in range(n_steps)]
        for t, name in self.py_hits:
            k = step_of(t) if n_steps else -1
            if k >= 0:
                py_by_step[k].add(name)
        return py_by_step

    def _check_finite(self) -> None:
        """Times that are not numbers (NaN, Infinity: JSON a profiler never writes) cannot be summed into a busy
        share: a ValueError, which the reader turns into bad input (exit 2), never a READY over "busy nan us"."""
        columns = {"GPU event ts": self.g_ts, "GPU event dur": self.g_dur, "CPU op ts": self.cpu_ts}
        for what, col in columns.items():
            if not math.isfinite(sum(col)):  # one pass; a sum of finite microseconds stays finite
                bad = sum(1 for v in col if not math.isfinite(v))
                raise ValueError(f"{bad} {what} value(s) are NaN or Infinity, which no profiler writes")
        if len(self.cpu_ts) and not (math.isfinite(self.cpu_min) and math.isfinite(self.cpu_max)):
            raise ValueError("CPU op times are NaN or Infinity, which no profiler writes")
        if any(not (math.isfinite(a) and math.isfinite(b)) for a, b, _ in self.steps):
            raise ValueError("a ProfilerStep's time is NaN or Infinity, which no profiler writes")

    def _cpu_span(self) -> float:
        return self.cpu_max - self.cpu_min if self.cpu_max > self.cpu_min else 0.0

    def _whole_span(self, steps: list[tuple[float, float, str]]) -> float:
        """CPU span of the whole trace: its ops and its steps (a step's range can outlast its ops), so it is
        never shorter than any step's."""
        w = self._summary_window(steps)
        return max(self._cpu_span(), (w[1] - w[0]) if w else 0.0)

    def _summary_window(self, steps: list[tuple[float, float, str]]) -> tuple[float, float] | None:
        lo, hi = self.cpu_min, self.cpu_max
        if steps:
            lo, hi = min(lo, steps[0][0]), max(hi, max(s[1] for s in steps))
        return (lo, hi) if hi > lo else None

    def _stats(self, name: str, idxs: list[tuple[int, int]], cpu_names: Counter[int], cpu_ops: int,
               window: tuple[float, float] | None, gpu: aggregate.GpuSteps, launches: int,
               cpu_span: float) -> StepStats:
        ks = aggregate.KernelStats(self.g_ts, self.g_dur, self.g_kind, self.g_name, idxs, gpu.delays, gpu.delay_mask)
        intervals, kdurs, kdelays, kcount, ktime = ks.intervals, ks.durations, ks.delays, ks.count, ks.time
        memcpy, memset, gpu_lo, gpu_hi = ks.memcpy, ks.memset, ks.gpu_lo, ks.gpu_hi
        busy, gaps = aggregate.union(intervals)
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




# ----------------------------------------------------------------------------------------------------
# report and text


def trace_report(path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None,
                 annotate: str | os.PathLike[str] | None = None, *, m: matrix.Matrix,
                 analysis: TraceAnalysis | None = None) -> Report:
    """Analyse the trace at `path` on the matrix `m` into a Report (command "trace"): summary, steps, findings,
    verdict. `annotate`: also write the trace back there with the findings as instant events (trace/annotate.py).
    `analysis`: the trace's analysis, already made (trace --budget reads the file once, with its collector)."""
    a = analysis if analysis is not None else analyze_file(path, progress, m=m)
    report = report_of(a)
    if annotate is not None:
        from kernelcheck.trace import annotate as annotate_mod

        n = annotate_mod.annotate(path, annotate, a, sig=m.signatures)
        if report.trace is not None:  # report_of always sets it
            done = dataclasses.replace(report.trace.trace, annotated=Annotated(str(annotate), n))
            report.trace = dataclasses.replace(report.trace, trace=done)
    return report


