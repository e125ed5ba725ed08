"""The per-step statistics' column-at-a-time gather (trace/analysis.py `_gather`) equals the event-by-event one
(`_gather_each`) on any columns: the same intervals, durations, delays, per-name counts and times (with their
insertion order: the JSON's kernel_counts follows it), counts and bounds, NaN and infinities included."""

from __future__ import annotations

import math
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck.trace import analysis
from kernelcheck.trace.fastfeed import KERNEL, MEMCPY, MEMSET

_floats = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.0, -0.0, 1.5, math.inf, -math.inf, math.nan]))
_event = st.tuples(_floats, _floats, st.sampled_from([KERNEL, MEMCPY, MEMSET]), st.integers(0, 5))


def _same(a: object, b: object) -> bool:
    return repr(a) == repr(b)  # NaN == NaN, -0.0 != 0.0, dict order counts


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=40), st.data())
def test_gather_equals_the_event_by_event_gather(events: list[tuple[float, float, int, int]],
                                                 data: st.DataObject) -> None:
    acc = analysis._Accumulator()
    for t, d, k, n in events:
        acc.g_ts.append(t)
        acc.g_dur.append(d)
        acc.g_kind.append(k)
        acc.g_name.append(n)
    n = len(events)
    delay_of = {i: float(i) / 3 for i in data.draw(st.sets(st.integers(0, max(n - 1, 0))))}
    subset = sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)))) & set(range(n)))
    for idxs in (range(n), subset):
        fast = acc._gather(idxs, delay_of)
        slow = acc._gather_each(list(idxs), delay_of)
        assert _same(fast, slow), (idxs, fast, slow)
        assert type(fast[0]) is list and all(type(x) is float for x in fast[1])
    assert isinstance(acc.g_ts, array)
