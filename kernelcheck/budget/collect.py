"""What a budget needs from a trace, gathered in the analysis' single pass, and each step's GPU time by op class.

While the trace is read (trace/analysis.py, trace/fastfeed.py hand events over): the CPU ranges (CPU ops, user
annotations) whose name a range rule or a cause names, decided once per distinct name, and the host's
synchronize calls. At the end, per step: each GPU activity's class (the innermost open range with a class when
it was launched, else its name's), the GPU time of each class, the gaps of the GPU timeline (the time no activity
ran inside the step), split into host sync waits (a gap that began while the host sat in a synchronize call: the
GPU ran dry because the host waited for it) and GPU idle (everything else), and the time two activities ran at
once (overlap), so that the classes plus the gaps minus the overlap are exactly the step's wall time.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from kernelcheck.budget.table import HOST_SYNC, IDLE, Classifier

SYNC_TOLERANCE_US = 5.0  # a gap that starts this soon after a synchronize call returned still follows from it
SYNC_WAKE_US = 200.0  # a synchronize call returns within this of the GPU's last work ending (the host's wake-up)
_FIRST = operator.itemgetter(0)


@dataclass
class NameTime:
    """GPU time and count of one kernel name inside one class (and the causes whose range it was launched in)."""

    us: float = 0.0
    count: int = 0


@dataclass
class StepRaw:
    """One step's GPU timeline by class, in microseconds."""

    name: str
    wall_us: float
    by_class_us: dict[str, float]
    by_class_count: dict[str, int]
    # (class or None, kernel name, cause ids of the ranges it was launched in) -> time
    by_name: dict[tuple[str | None, str, frozenset[str]], NameTime]
    overlap_us: float
    gaps: dict[str, int]  # class -> number of gaps (idle, host_sync)
    syncs: int  # host synchronize calls in the step
    activities: int

    @property
    def unclassified_us(self) -> float:
        return sum(t.us for (c, _, _), t in self.by_name.items() if c is None)


@dataclass
class BudgetCollector:
    """Fed by the analysis accumulator; `steps()` at the end."""

    classifier: Classifier
    ranges: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, name), the kept ones
    syncs: list[tuple[float, float]] = field(default_factory=list)
    _keep: dict[Any, str | None] = field(default_factory=dict)  # a range's name (str or file bytes) -> kept name

    # -- fed during the pass -----------------------------------------------------------------------------
    def _kept(self, name: Any) -> str | None:
        hit = self._keep.get(name, "")
        if hit == "":
            text = name.decode("utf-8", "replace") if type(name) is bytes else str(name)
            hit = self._keep[name] = text if self.classifier.wants_range(text) else None
        return hit

    def cpu_range(self, name: str, ts: float, end: float) -> None:
        kept = self._kept(name)
        if kept is not None:
            self.ranges.append((ts, end, kept))

    def cpu_bulk(self, names: list[Any], ts: Sequence[float], end: Sequence[float]) -> None:
        """CPU ops of a run at once: only the kept names go further (one dict look-up per op)."""
        kept = list(map(self._kept, names))
        if any(kept):
            mask = list(map(bool, kept))
            names_kept: list[str] = [k for k in kept if k is not None]
            self.ranges.extend(zip(compress(ts, mask), compress(end, mask), names_kept, strict=True))

    def sync(self, ts: float, end: float) -> None:
        self.syncs.append((ts, end))

    def sync_bulk(self, names: list[str], ts: Sequence[float], dur: Iterable[float]) -> None:
        mask = ["ynchronize" in n for n in names]
        if any(mask):
            self.syncs.extend((t, t + d) for t, d in compress(zip(ts, dur, strict=False), mask))

    # -- at the end --------------------------------------------------------------------------------------
    def steps(self, steps: Sequence[tuple[float, float, str]], by_step: Sequence[list[tuple[int, int]]],
              g_ts: array[float], g_dur: array[float], g_name: array[int], g_corr: array[int],
              launch_end: dict[int, float], name_list: list[str]) -> list[StepRaw]:
        """Each step's budget; the activities of a step are those the analysis assigned to it (by_step)."""
        idx = sorted(i for ranges in by_step for lo, hi in ranges for i in range(lo, hi))
        ctx = self._range_context(idx, g_corr, launch_end)
        syncs = sorted(self.syncs)
        sync_starts = [s for s, _ in syncs]
        out = []
        for k, (s0, s1, name) in enumerate(steps):
            acts = [i for lo, hi in by_step[k] for i in range(lo, hi)]
            out.append(self._step(name, s0, s1, acts, g_ts, g_dur, g_name, ctx, name_list, syncs, sync_starts))
        return out

    def _range_context(self, idx: list[int], g_corr: array[int], launch_end: dict[int, float],
                       ) -> dict[int, tuple[str | None, frozenset[str]]]:
        """Activity index -> (the class of the innermost open range with a class at its launch, the causes whose
        range was open), for activities launched inside a kept range. A sweep in time order over the launches and
        the ranges; the open ranges are few (the nesting depth)."""
        if not self.ranges:
            return {}
        launches = sorted((t, i) for i in idx if (t := launch_end.get(g_corr[i])) is not None)
        ranges = sorted(self.ranges, key=_FIRST)
        cls = self.classifier
        causes = cls.table.causes
        cause_of: dict[str, frozenset[str]] = {}
        out: dict[int, tuple[str | None, frozenset[str]]] = {}
        open_: list[tuple[float, float, str]] = []  # heap by end: (end, start, name)
        j, n = 0, len(ranges)
        for t, i in launches:
            while j < n and ranges[j][0] <= t:
                s, e, nm = ranges[j]
                heapq.heappush(open_, (e, s, nm))
                j += 1
            while open_ and open_[0][0] < t:
                heapq.heappop(open_)
            if not open_:
                continue
            inner = sorted(open_, key=lambda r: -r[1])  # latest start first: innermost
            rc = next((c for r in inner if (c := cls.of_range(r[2])) is not None), None)
            hits: frozenset[str] = frozenset()
            for r in inner:
                nm = r[2]
                got = cause_of.get(nm)
                if got is None:
                    got = cause_of[nm] = frozenset(c.id for c in causes if c.range is not None and c.range.search(nm))
                hits = hits | got
            if rc is not None or hits:
                out[i] = (rc, hits)
        return out

    def _step(self, name: str, s0: float, s1: float, acts: list[int], g_ts: array[float], g_dur: array[float],
              g_name: array[int], ctx: dict[int, tuple[str | None, frozenset[str]]], name_list: list[str],
              syncs: list[tuple[float, float]], sync_starts: list[float]) -> StepRaw:
        cls = self.classifier
        by_class: defaultdict[str, float] = defaultdict(float)
        count: defaultdict[str, int] = defaultdict(int)
        by_name: dict[tuple[str | None, str, frozenset[str]], NameTime] = {}
        intervals = []
        total = 0.0
        none: frozenset[str] = frozenset()
        for i in acts:
            kname = name_list[g_name[i]]
            rc, hits = ctx.get(i, (None, none))
            c = rc if rc is not None else cls.of_kernel(kname)
            d = g_dur[i]
            t = g_ts[i]
            total += d
            intervals.append((t, t + d))
            key = (c, kname, hits)
            nt = by_name.get(key)
            if nt is None:
                nt = by_name[key] = NameTime()
            nt.us += d
            nt.count += 1
            if c is not None:
                by_class[c] += d
                count[c] += 1
        lo = min([s0, *(a for a, _ in intervals)]) if intervals else s0
        hi = max([s1, *(b for _, b in intervals)]) if intervals else s1
        busy, gaps = _gaps(intervals, lo, hi)
        n_gaps = {IDLE: 0, HOST_SYNC: 0}
        for g0, g1 in gaps:
            k = HOST_SYNC if _after_sync(g0, syncs, sync_starts) else IDLE
            by_class[k] += g1 - g0
            n_gaps[k] += 1
        n_sync = bisect.bisect_right(sync_starts, hi) - bisect.bisect_left(sync_starts, lo)
        return StepRaw(name=name, wall_us=hi - lo, by_class_us=dict(by_class), by_class_count=dict(count),
                       by_name=by_name, overlap_us=max(0.0, total - busy), gaps=n_gaps, syncs=n_sync,
                       activities=len(acts))


def _gaps(intervals: list[tuple[float, float]], lo: float, hi: float) -> tuple[float, list[tuple[float, float]]]:
    """(busy time, the gaps) of the intervals inside [lo, hi], the window's edges included."""
    gaps = []
    busy = 0.0
    cur = lo
    for a, b in sorted(intervals):
        if a > cur:
            gaps.append((cur, a))
        if b > cur:
            busy += b - max(a, cur)
            cur = b
    if hi > cur:
        gaps.append((cur, hi))
    return busy, gaps


def _after_sync(g0: float, syncs: list[tuple[float, float]], starts: list[float]) -> bool:
    """Whether the gap starting at g0 is the GPU running dry under a host that waited for it: the gap began while
    the host sat in a synchronize call, and the call returned right then (within SYNC_WAKE_US). A short bubble
    between two kernels in the middle of a long wait is not one: the call went on waiting after it."""
    k = bisect.bisect_right(starts, g0 + SYNC_TOLERANCE_US) - 1
    for j in range(k, max(-1, k - 8), -1):
        s, e = syncs[j]
        if s <= g0 + SYNC_TOLERANCE_US and e - SYNC_WAKE_US <= g0 <= e + SYNC_TOLERANCE_US:
            return True
    return False
