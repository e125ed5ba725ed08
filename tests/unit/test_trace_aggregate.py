"""The trace's per-step aggregation over columns (trace/aggregate.py, gpushare.shares, phases' sums) gives, bit for
bit, what the loops over single events give: on steps that follow one another, overlap or touch, on times in
order or not, with NaN, infinities, -0.0 and negative durations (a JSON file can hold them)."""

from __future__ import annotations

import bisect
import math
from array import array
from collections import Counter, defaultdict

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernelcheck.trace import aggregate, gpushare, phases

_t = st.floats(-5.0, 120.0, allow_nan=False).map(lambda x: round(x, 1))
_odd = st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0])
_time = _t | _odd


def _steps_of(draw_list: list[tuple[float, float]]) -> list[tuple[float, float, str]]:
    return sorted((a, b, f"ProfilerStep#{i}") for i, (a, b) in enumerate(draw_list))


_steps = st.lists(st.tuples(_t, st.floats(0.0, 40.0).map(lambda x: round(x, 1))).map(lambda p: (p[0], p[0] + p[1])),
                  max_size=5).map(_steps_of)
_steps_any = st.lists(st.tuples(_time, _time), max_size=4).map(_steps_of)  # ends before starts, NaN, ...


def _times(sorted_runs: bool) -> st.SearchStrategy[list[float]]:
    if sorted_runs:
        return st.lists(st.lists(_t, max_size=30).map(sorted), max_size=4).map(lambda rs: [t for r in rs for t in r])
    return st.lists(_time, max_size=60)


def _step_of_loop(steps: list[tuple[float, float, str]], t: float) -> int:
    """What finish() did for one time before the columns (its step_of)."""
    starts = [s[0] for s in steps]
    k = bisect.bisect_right(starts, t) - 1
    if k >= 0 and t <= steps[k][1]:
        return k
    return -1


@settings(max_examples=300, deadline=None)
@given(times=st.booleans().flatmap(_times), steps=_steps | _steps_any)
def test_slices_put_each_time_in_the_step_the_loop_put_it(times: list[float], steps: list) -> None:
    per_step: list[list[int]] = [[] for _ in steps]
    for i, t in enumerate(times):
        k = _step_of_loop(steps, t)
        if k >= 0:
            per_step[k].append(i)
    slices = aggregate.step_slices(times, steps)
    if slices is not None:
        got: list[list[int]] = [[] for _ in steps]
        for k, lo, hi in slices:
            got[k].extend(range(lo, hi))
        assert got == per_step
    assert aggregate.count_per_step(times, steps) == [len(ix) for ix in per_step]


@settings(max_examples=300, deadline=None)
@given(times=st.booleans().flatmap(_times), steps=_steps | _steps_any, data=st.data())
def test_cpu_ops_per_step_are_counted_as_the_loop_counted_them(times: list[float], steps: list,
                                                               data: st.DataObject) -> None:
    names = data.draw(st.lists(st.integers(0, 6), min_size=len(times), max_size=len(times)))
    ts, nm = array("d", times), array("i", names)
    counts, per_step, every = aggregate.cpu_per_step(ts, nm, steps)
    loop_counts, loop_per_step, loop_every = aggregate._cpu_per_step_loop(ts, nm, steps)
    assert counts == loop_counts and every == loop_every
    assert [dict(c) for c in per_step] == [dict(c) for c in loop_per_step]
    assert [list(c) for c in per_step] == [list(c) for c in loop_per_step]  # first-seen order too


def _stats_loop(g_ts, g_dur, g_kind, g_name, idxs, delay_of):
    """What _Accumulator._stats computed per activity before the columns."""
    intervals, kdurs, kdelays = [], [], []
    kcount: Counter[int] = Counter()
    ktime: defaultdict[int, float] = defaultdict(float)
    memcpy = memset = 0
    lo, hi = float("inf"), float("-inf")
    for i in idxs:
        t, d, kind = g_ts[i], g_dur[i], g_kind[i]
        if t < lo:
            lo = t
        if t + d > hi:
            hi = t + d
        if kind == aggregate.MEMCPY:
            memcpy += 1
            continue
        if kind == aggregate.MEMSET:
            memset += 1
            continue
        intervals.append((t, t + d))
        kdurs.append(d)
        kcount[g_name[i]] += 1
        ktime[g_name[i]] += d
        if (dl := delay_of.get(i)) is not None:
            kdelays.append(dl)
    return lo, hi, memcpy, memset, intervals, kdurs, list(kcount.items()), list(ktime.items()), kdelays


def _union_loop(intervals):
    intervals = sorted(intervals)
    busy, gaps, total, longest = 0.0, 0, 0.0, 0.0
    cur_s, cur_e = intervals[0]
    for s, e in intervals[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            g = s - cur_e
            gaps, total = gaps + 1, total + g
            if g > longest:
                longest = g
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    return busy + (cur_e - cur_s), {"count": gaps, "total_us": total, "longest_us": longest}


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN and -0.0 told from 0.0 (repr compares the bits that matter)."""
    return repr(a) == repr(b)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), steps=_steps | _steps_any)
def test_kernel_stats_and_launch_delays_are_the_loops(data: st.DataObject, steps: list) -> None:
    n = data.draw(st.integers(0, 40))
    g_ts = array("d", data.draw(st.lists(_time, min_size=n, max_size=n)))
    g_dur = array("d", data.draw(st.lists(_time | st.floats(-3, 3), min_size=n, max_size=n)))
    g_kind = array("b", data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    g_name = array("i", data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    g_corr = array("q", data.draw(st.lists(st.integers(-2, 30), min_size=n, max_size=n)))
    launch_end = data.draw(st.dictionaries(st.integers(-2, 30), _time, max_size=25))

    gpu = aggregate.GpuSteps(g_ts, g_corr, g_kind, launch_end, steps)
    # before: the launch's end (never for a negative id), else the start, gave the step; kernels got a delay
    by_step: list[list[int]] = [[] for _ in steps]
    delay_of = {}
    for i, (t, c, kind) in enumerate(zip(g_ts, g_corr, g_kind, strict=True)):
        le = launch_end.get(c) if c >= 0 else None
        if le is not None and kind == aggregate.KERNEL:
            delay_of[i] = max(0.0, t - le)
        k = _step_of_loop(steps, le if le is not None else t)
        if k >= 0:
            by_step[k].append(i)
    assert [[i for lo, hi in r for i in range(lo, hi)] for r in gpu.by_step] == by_step

    for ranges, idxs in [([(0, n)], range(n)), *zip(gpu.by_step, by_step, strict=True)]:
        ks = aggregate.KernelStats(g_ts, g_dur, g_kind, g_name, ranges, gpu.delays, gpu.delay_mask)
        got = (ks.gpu_lo, ks.gpu_hi, ks.memcpy, ks.memset, ks.intervals, ks.durations, list(ks.count.items()),
               list(ks.time.items()), ks.delays)
        assert _same(got, _stats_loop(g_ts, g_dur, g_kind, g_name, idxs, delay_of))
        if ks.intervals:
            assert _same(aggregate.union(list(ks.intervals)), _union_loop(ks.intervals))


def _shares_loop(gpu):
    """gpushare.shares before: max() calls and Share fields added one by one."""
    out: dict[int, list[float]] = {}
    front = None
    for ts, dur, corr, is_kernel in sorted(gpu, key=lambda g: g[0]):
        end = ts + dur
        s = out.setdefault(corr, [0, 0.0, 0.0, 0.0])
        if is_kernel:
            s[0] += 1
            s[1] += dur
        if front is None:
            s[2] += dur
            front = end
            continue
        s[3] += max(0.0, ts - front)
        s[2] += max(0.0, end - max(ts, front))
        front = max(front, end)
    return out


@settings(max_examples=300, deadline=None)
@given(gpu=st.lists(st.tuples(_time, _time | st.floats(-3, 3), st.integers(0, 8), st.booleans()), max_size=30))
@example(gpu=[(1.0, -0.0, 1, True), (2.0, -0.0, 2, False)])  # adding -0.0 to 0.0 gives 0.0
def test_timeline_shares_are_the_loops(gpu: list) -> None:
    got = {c: [s.kernels, s.kernel_us, s.busy_us, s.idle_us] for c, s in gpushare.shares(gpu).items()}
    want = _shares_loop(gpu)
    assert _same(list(got.items()), list(want.items()))


@settings(max_examples=200, deadline=None)
@given(shares=st.lists(st.tuples(st.integers(0, 3), _time, _time, _time), max_size=20))
def test_a_range_adds_shares_in_bulk_as_one_by_one(shares: list) -> None:
    ss = [gpushare.Share(*s) for s in shares]
    one, bulk = phases._Range("r", 0.0, 1.0, 1), phases._Range("r", 0.0, 1.0, 1)
    for s in ss:
        one.add(s)
    bulk.add_all(ss)
    assert _same(one, bulk)
