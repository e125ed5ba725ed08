"""The per-step aggregation of an analysed trace, over its columns at once (mostly in C): which step each CPU op,
GPU activity and launch belongs to, and a step's kernel statistics. The numbers are the ones a loop over the
events gives, bit for bit: float sums are taken in the same order, min/max compare as the loop did.

A step is found for a time t as `bisect_right(starts, t) - 1`, kept when t <= that step's end. torch writes its
events in time order (a trace holds a handful of ascending runs), and profiler steps follow one another, so
a step's events are a slice of each run, found by bisection: `step_slices`. Anything else (steps that overlap
or touch, times in no order) is assigned one time at a time, as before.
"""

from __future__ import annotations

import bisect
import operator
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from itertools import chain, compress, islice, repeat
from typing import Any

KERNEL, MEMCPY, MEMSET = 0, 1, 2
Steps = Sequence[tuple[float, float, str]]  # (start, end, name), sorted
_INF = float("inf")


def step_of_fn(steps: Steps) -> Callable[[float], int]:
    """The step index of one time (-1: in none): the latest step starting at or before it, if it ends after."""
    starts = [s[0] for s in steps]

    def step_of(t: float) -> int:
        k = bisect.bisect_right(starts, t) - 1
        if k >= 0 and t <= steps[k][1]:
            return k
        return -1

    return step_of


def step_slices(times: Sequence[float], steps: Steps) -> list[tuple[int, int, int]] | None:
    """(step, lo, hi) for each ascending run of `times` and each step with times[lo:hi] in it, in index order:
    exactly the indices `step_of_fn(steps)` puts in each step. None when the steps overlap or touch, or the times
    fall in too many runs: then the caller takes them one by one."""
    n, n_steps = len(times), len(steps)
    if not n or not n_steps:
        return [] if n_steps else None
    if any(steps[k][1] >= steps[k + 1][0] for k in range(n_steps - 1)) or not all(s[0] <= s[1] for s in steps):
        return None  # (a NaN bound fails these too)
    ascending = bytes(map(operator.le, times, islice(times, 1, None)))
    cuts = [0]
    i = ascending.find(0)
    while i >= 0:
        cuts.append(i + 1)
        if len(cuts) * n_steps > 64 + n // 8:
            return None
        i = ascending.find(0, i + 1)
    cuts.append(n)
    out = []
    left, right = bisect.bisect_left, bisect.bisect_right
    for a, b in zip(cuts, islice(cuts, 1, None), strict=False):
        if b - a == 1 and times[a] != times[a]:
            continue  # NaN: a run of its own (it compares false both ways), in no step
        lo_t, hi_t = times[a], times[b - 1]
        for k, (s0, s1, _) in enumerate(steps):
            if s1 < lo_t or s0 > hi_t:
                continue
            lo, hi = left(times, s0, a, b), right(times, s1, a, b)
            if hi > lo:
                out.append((k, lo, hi))
    return out


def cpu_per_step(cpu_ts: array[float], cpu_name: array[int], steps: Steps,
                 ) -> tuple[list[int], list[Counter[int]], Counter[int]]:
    """CPU ops per step: (count per step, count per name per step, count per name over the whole trace)."""
    n_steps = len(steps)
    counts = [0] * n_steps
    names: list[Counter[int]] = [Counter() for _ in range(n_steps)]
    if not n_steps:
        return counts, names, Counter(cpu_name)
    slices = step_slices(cpu_ts, steps)
    if slices is None:
        return _cpu_per_step_loop(cpu_ts, cpu_name, steps)
    outside: Counter[int] = Counter()
    prev = 0
    for k, lo, hi in sorted(slices, key=operator.itemgetter(1)):
        outside.update(cpu_name[prev:lo])
        names[k].update(cpu_name[lo:hi])
        counts[k] += hi - lo
        prev = hi
    outside.update(cpu_name[prev:])
    every = Counter(outside)
    for c in names:
        every.update(c)
    return counts, names, every


def _cpu_per_step_loop(cpu_ts: array[float], cpu_name: array[int], steps: Steps,
                       ) -> tuple[list[int], list[Counter[int]], Counter[int]]:
    """`cpu_per_step` one op at a time: a step index per op (4 bytes), found by bisection only when the op leaves
    the previous op's step; then counts per (step, name) in C."""
    n_steps = len(steps)
    starts = [s[0] for s in steps]
    counts = [0] * n_steps
    names: list[Counter[int]] = [Counter() for _ in range(n_steps)]
    kidx = array("i")
    put = kidx.append
    k, s0, s1 = -1, 1.0, 0.0  # an empty window: the first op looks its step up
    for t in cpu_ts:
        if not s0 <= t <= s1:
            k = bisect.bisect_right(starts, t) - 1
            if k >= 0 and t <= steps[k][1]:
                s0, s1 = steps[k][0], steps[k][1]
            else:
                k, s0, s1 = -1, 1.0, 0.0
        put(k)
    for (k, ni), c in Counter(zip(kidx, cpu_name, strict=False)).items():
        if k >= 0:
            counts[k] += c
            names[k][ni] = c
    return counts, names, Counter(cpu_name)


class GpuSteps:
    """Each GPU activity's step (the step whose CPU side launched it: the launch call's end, else the step whose
    window holds its start) and each kernel's launch delay (its start minus its launch call's end, at least 0)."""

    def __init__(self, g_ts: array[float], g_corr: array[int], g_kind: array[int], launch_end: dict[int, float],
                 steps: Steps):
        n_steps = len(steps)
        ends = launch_end if not launch_end or min(launch_end) >= 0 else {
            c: e for c, e in launch_end.items() if c >= 0}  # a negative correlation id matches nothing
        times = list(map(ends.get, g_corr, g_ts))  # the launch's end, else the activity's start
        launched = map(ends.__contains__, g_corr)
        # delay_mask[i]: activity i is a kernel with a launch; delays[i]: its delay (0.0 where it has none)
        self.delay_mask = bytes(map(operator.and_, launched, map(operator.eq, g_kind, repeat(KERNEL))))
        self.delays = [d if d > 0.0 else 0.0 for d in map(operator.sub, g_ts, times)]  # max(0.0, d), NaN: 0.0
        # each step's activities: index ranges (lo, hi), in index order
        self.by_step: list[list[tuple[int, int]]] = [[] for _ in range(n_steps)]
        if not n_steps:
            return
        slices = step_slices(times, steps)
        if slices is not None:
            for k, lo, hi in slices:
                self.by_step[k].append((lo, hi))
        else:
            step_of = step_of_fn(steps)
            for idx, t in enumerate(times):
                k = step_of(t)
                if k >= 0:
                    self.by_step[k].append((idx, idx + 1))


def count_per_step(times: Sequence[float], steps: Steps) -> list[int]:
    """How many of `times` fall in each step (times outside every step are not counted)."""
    n_steps = len(steps)
    counts = [0] * n_steps
    if not n_steps:
        return counts
    slices = step_slices(times, steps)
    if slices is not None:
        for k, lo, hi in slices:
            counts[k] += hi - lo
        return counts
    step_of = step_of_fn(steps)
    for t in times:
        k = step_of(t)
        if k >= 0:
            counts[k] += 1
    return counts


class KernelStats:
    """What a step's GPU activities (index ranges (lo, hi), in index order) add up to: the GPU span, memcpy/memset
    counts, the kernels' intervals, durations, per-name counts and summed times, and their launch delays."""

    def __init__(self, g_ts: array[float], g_dur: array[float], g_kind: array[int], g_name: array[int],
                 ranges: list[tuple[int, int]], delays: list[float], delay_mask: bytes):
        ts = _take(g_ts, ranges)
        dur = _take(g_dur, ranges)
        kind = _take(g_kind, ranges)
        names = _take(g_name, ranges)
        dl = _take(delays, ranges)
        dm = _take(delay_mask, ranges)
        ends = list(map(operator.add, ts, dur))
        # as the loop did: the first time below +inf, the first end above -inf (a NaN never taken)
        self.gpu_lo: float = min(chain((_INF,), ts))
        self.gpu_hi: float = max(chain((-_INF,), ends))
        self.memcpy, self.memset = kind.count(MEMCPY), kind.count(MEMSET)
        is_kernel = list(map(operator.eq, kind, repeat(KERNEL)))
        self.intervals = list(zip(compress(ts, is_kernel), compress(ends, is_kernel), strict=False))
        self.durations = list(compress(dur, is_kernel))
        knames = list(compress(names, is_kernel))
        self.count: Counter[int] = Counter(knames)
        time: defaultdict[int, float] = defaultdict(float)
        for ni, d in zip(knames, self.durations, strict=True):
            time[ni] += d
        self.time = time
        self.delays = list(compress(dl, dm))


def _take(column: Any, ranges: list[tuple[int, int]]) -> Any:
    """The column's items in the ranges, in order: slices (in C) while they are few, else item by item."""
    if len(ranges) == 1:
        lo, hi = ranges[0]
        return column if lo == 0 and hi == len(column) else column[lo:hi]
    if len(ranges) <= 64:
        return list(chain.from_iterable(column[lo:hi] for lo, hi in ranges))
    return [column[i] for lo, hi in ranges for i in range(lo, hi)]


def union(intervals: list[tuple[float, float]]) -> tuple[float, dict[str, float]]:
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
