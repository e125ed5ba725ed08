"""Each launch's share of the GPU timeline: the time its GPU work adds to the step, idle gaps included.

The GPU's activity (kernels, memcpy, memset) is walked in start order with a frontier, the latest end
seen so far. An event that starts after the frontier left the GPU idle for `start - frontier`: the GPU
was waiting for that launch, so the gap is the launch's. Its busy share is how far it pushes the
frontier past max(start, frontier) (a kernel overlapping another on a second stream only counts what it
adds). Over a trace the shares sum to the GPU span: nothing is counted twice, nothing is lost.

Why this and not a range's CPU time: on a deep queue (the bound path) a range's CPU time holds waits for
other layers' queued kernels (a synchronising call inside it drains the whole queue), so the same sdpa
kernels cost 91 ms per layer in one run and 48 in the other. The kernels a range launched (joined
through the launch's correlation id) and the idle time they caused are the range's own cost on both
paths: a GPU-bound layer costs its kernel time, a launch-bound one its kernel time plus the gaps the
GPU spent waiting for its launches.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass

_start = operator.itemgetter(0)
_busy, _idle = operator.attrgetter("busy_us"), operator.attrgetter("idle_us")


@dataclass(slots=True)
class Share:
    """One correlation id's GPU work: kernels counted, their summed duration, busy share and idle gap (us)."""

    kernels: int = 0
    kernel_us: float = 0.0
    busy_us: float = 0.0
    idle_us: float = 0.0

    @property
    def span_us(self) -> float:
        return self.busy_us + self.idle_us


def shares(gpu: Iterable[tuple[float, float, int, bool]]) -> dict[int, Share]:
    """gpu: (start us, duration us, correlation id, is a kernel) per GPU event -> correlation id -> Share."""
    out: dict[int, Share] = {}
    get = out.get
    front: float | None = None
    for ts, dur, corr, is_kernel in sorted(gpu, key=_start):
        # max(0.0, x), max(ts, front) and max(front, end) written out: the same values, a third of the time
        end = ts + dur
        if front is None:
            busy, idle = 0.0 + dur, None
            front = end
        else:
            gap = ts - front
            idle = gap if gap > 0.0 else 0.0
            b = end - (front if front > ts else ts)
            busy = b if b > 0.0 else 0.0
            if end > front:
                front = end
        s = get(corr)
        if s is None:  # a new Share's fields start at 0 (0.0 + x: what adding to 0.0 gives, -0.0 included)
            out[corr] = Share(1 if is_kernel else 0, 0.0 + dur if is_kernel else 0.0, 0.0 + busy,
                              0.0 if idle is None else 0.0 + idle)
            continue
        if is_kernel:
            s.kernels += 1
            s.kernel_us += dur
        s.busy_us += busy
        if idle is not None:
            s.idle_us += idle
    return out


def totals(by_corr: dict[int, Share]) -> tuple[float, float]:
    """(busy us, idle us) over the whole timeline."""
    return sum(map(_busy, by_corr.values())), sum(map(_idle, by_corr.values()))
