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
        end = ts + dur
        s = get(corr)
        if s is None:
            s = out[corr] = Share()
        if is_kernel:
            s.kernels += 1
            s.kernel_us += dur
        if front is None:
            s.busy_us += dur
            front = end
            continue
        s.idle_us += max(0.0, ts - front)
        s.busy_us += max(0.0, end - max(ts, front))
        front = max(front, end)
    return out


def totals(by_corr: dict[int, Share]) -> tuple[float, float]:
    """(busy us, idle us) over the whole timeline."""
    return sum(s.busy_us for s in by_corr.values()), sum(s.idle_us for s in by_corr.values())
