"""`waste.measure`, vectorized over chunks of lengths with numpy: the same numbers, at tens of MB/s.

waste.py's `measure` is the reference (one Python step per example, about 1 us each: a 2 GiB lengths file
took 25 minutes). Here each chunk is handled in numpy:
- `batch:B` and `packing:N` need no search: batches start every B examples; packing's steps follow from
  the total tokens.
- `budget:N` is a greedy scan (a batch grows while (size + 1) * longest <= N), sequential by nature. The
  chunk is cut into lanes of LANE examples and the scan runs in all lanes at once, each lane guessing that a
  batch starts at its first example (a few numpy operations per position, over all lanes together). Then the
  true batches are walked from the chunk's start, one numpy step per batch, only until the walk meets a batch
  start the lane's guess also has: from there on the guess is the truth, to the lane's end. Real data meets
  within a batch or two; periodic data whose batches never line up with the lanes is exact but walks every
  batch (slower).
The last batch of a chunk stays open and is carried into the next one, so chunk borders change nothing.
`tests/unit/test_reader_fuzz.py` holds the two implementations equal on random and adversarial data.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from kernelcheck.padding import waste
from kernelcheck.padding.values import Chunk
from kernelcheck.padding.waste import Rule, Waste

log = logging.getLogger(__name__)

try:
    import numpy as np
except ImportError:  # pragma: no cover - transformers requires numpy
    np = None  # type: ignore[assignment]

LANE = 256  # shorter lanes, more of them per numpy step: fewer steps per chunk (measured: 1024 -> 256 is 10% less CPU)
MARGIN = 96  # positions each lane scans before its region, to fall in step with the true batches
_DENSE_MAX = 1 << 22  # lengths up to this are tallied in dense arrays (bincount), larger ones by sorting


def _next_start(data: Any, s: int, budget: int) -> int:
    """The start of the batch after the one starting at `s` (len(data) when it runs to the end)."""
    top = 0
    for i, x in enumerate(data[s:s + 16].tolist()):  # most batches are short: plain Python is quickest
        top = max(top, x)
        if (i + 1) * top > budget:
            return s + i
    width = 64
    while s + 16 < data.size:
        win = data[s:s + width]
        over = np.arange(1, win.size + 1) * np.maximum.accumulate(win) > budget
        if over.any():
            return s + int(over.argmax())
        if s + width >= data.size:
            break
        width *= 4
    return int(data.size)


def _guess(data: Any, budget: int, lane: int, margin: int) -> Any:
    """Batch-start flags, shape (margin + lane, lanes): row t is offset t of every lane; lane k starts its scan
    `margin` positions before its region (data[k * lane:(k + 1) * lane]) as if a batch started there, so it
    has usually fallen in step with the true batches by the region's start.

    The scan tracks each lane's batch size and cap, the most examples its longest allows (budget // longest):
    an example starts a new batch when the size has reached min(cap, budget // example)."""
    lanes = -(-data.size // lane)
    # the narrowest type that holds every value below (at most 2 * budget): fewer bytes per lane step
    dt = np.int16 if 2 * budget < (1 << 15) else np.int32 if 2 * budget < (1 << 31) else np.int64
    caps = np.full(margin + lanes * lane, budget, dtype=dt)
    caps[:margin] = 1  # examples of the full budget before lane 0: a batch of its own each, so position 0 starts one
    caps[margin:margin + data.size] = budget // data
    cols = np.lib.stride_tricks.as_strided(caps, shape=(margin + lane, lanes),
                                           strides=(caps.itemsize, lane * caps.itemsize)).copy()
    keep = np.empty(cols.shape, dtype=bool)  # not a batch start
    count = np.zeros(lanes, dtype=dt)
    cap = np.zeros(lanes, dtype=dt)
    lim = np.empty(lanes, dtype=dt)
    kept = np.empty(lanes, dtype=dt)
    for t in range(margin + lane):  # arithmetic, no `where=`: numpy's masked copies are several times slower
        x = cols[t]
        np.minimum(cap, x, out=lim)
        np.less(count, lim, out=keep[t])
        kept[...] = keep[t]
        np.multiply(count, kept, out=count)  # a new batch: 1, else size + 1
        count += 1
        np.subtract(lim, x, out=cap)  # a new batch: its example's cap x, else min(cap, x)
        np.multiply(cap, kept, out=cap)
        np.add(cap, x, out=cap)
    return ~keep


class _Walk:
    """The true batch starts: the lanes' guesses where they are in step with the truth, walked where not."""

    def __init__(self, data: Any, budget: int) -> None:
        self.data, self.budget = data, budget
        self.lane: int = min(LANE, data.size)
        self.margin = min(MARGIN, self.lane - 1)
        self.flags = _guess(data, budget, self.lane, self.margin)
        region = self.flags[self.margin:]
        self.mask = region.T.reshape(-1)[:data.size].copy()
        self.has = region.any(axis=0)
        self.last = self.lane - 1 - np.argmax(region[::-1], axis=0)  # last guessed start in each region

    def in_step(self, k: int, q: int) -> bool:
        """Whether lane k's guess has a batch start at q, the last true start before its region."""
        off = q - (k * self.lane - self.margin)
        return 0 <= off < self.margin and bool(self.flags[off, k])

    def _last_before(self, k: int) -> int:
        for j in range(k - 1, -1, -1):
            hit = np.flatnonzero(self.mask[j * self.lane:(j + 1) * self.lane])
            if hit.size:
                return j * self.lane + int(hit[-1])
        return 0

    def fix(self, k: int) -> bool:
        """Walk region k from the true start before it; True when the region's last start may have changed."""
        lo, hi = k * self.lane, min((k + 1) * self.lane, self.data.size)
        p = _next_start(self.data, self._last_before(k), self.budget)
        self.mask[lo:hi] = False
        while p < hi:
            if self.flags[p - lo + self.margin, k]:
                self.mask[p:hi] = self.flags[p - lo + self.margin:hi - lo + self.margin, k]
                return False
            self.mask[p] = True
            p = _next_start(self.data, p, self.budget)
        return True

    def starts(self) -> Any:
        lanes = self.flags.shape[1]
        ks = np.arange(1, lanes)
        q = (ks - 1) * self.lane + self.last[:-1]
        off = q - (ks * self.lane - self.margin)
        ok = self.has[:-1] & (off >= 0) & (off < self.margin)
        ok[ok] = self.flags[off[ok], ks[ok]]
        todo = sorted((ks[~ok]).tolist())
        while todo:
            k = todo.pop(0)
            moved = self.fix(k) and k + 1 < lanes and not self.in_step(k + 1, self._last_before(k + 1))
            if moved and (not todo or todo[0] != k + 1):
                todo.insert(0, k + 1)
        return np.flatnonzero(self.mask)


def budget_starts(data: Any, budget: int) -> Any:
    """Indices where a batch starts under budget:N (data[0] starts one); values already capped at N."""
    return _Walk(data, budget).starts()


class _Tally:
    """Examples and padding per length, in dense numpy arrays while lengths are small (Counter updates of
    thousands of keys per chunk cost more than the scan), in Counters past that."""

    def __init__(self) -> None:
        self.examples = np.zeros(0, dtype=np.int64)
        self.pads = np.zeros(0, dtype=np.int64)
        self.big_examples: Counter[int] = Counter()
        self.big_pads: Counter[int] = Counter()

    @staticmethod
    def _grow(arr: Any, size: int) -> Any:
        if arr.size >= size:
            return arr
        out = np.zeros(max(size, 2 * arr.size), dtype=np.int64)
        out[:arr.size] = arr
        return out

    def add(self, values: Any, pads: Any = None) -> None:
        top = int(values.max())
        exact = pads is None or int(pads.max(initial=0)) * values.size < (1 << 53)  # float64 sums exact
        if top <= _DENSE_MAX and exact:
            counted = np.bincount(values, weights=pads)
            if pads is None:
                self.examples = self._grow(self.examples, counted.size)
                self.examples[:counted.size] += counted
            else:
                self.pads = self._grow(self.pads, counted.size)
                self.pads[:counted.size] += np.rint(counted).astype(np.int64)
            return
        order = np.argsort(values, kind="stable")
        keys, first = np.unique(values[order], return_index=True)
        summed = np.add.reduceat(pads[order] if pads is not None else np.ones(values.size, np.int64), first)
        (self.big_examples if pads is None else self.big_pads).update(dict(zip(keys.tolist(), summed.tolist(),
                                                                              strict=True)))

    def into(self, w: Waste) -> None:
        """Every length seen gets its examples and its padding (0 included), as waste.measure counts them."""
        present = np.flatnonzero(self.examples)
        w.by_length.update(dict(zip(present.tolist(), self.examples[present].tolist(), strict=True)))
        pads = self._grow(self.pads, self.examples.size)
        w.waste_by_length.update(dict(zip(present.tolist(), pads[present].tolist(), strict=True)))
        w.by_length.update(self.big_examples)
        for n in self.big_examples:
            w.waste_by_length[n] += self.big_pads.get(n, 0)
        for n, v in self.big_pads.items():  # a small length whose chunk was tallied the sorting way
            if n not in self.big_examples:
                w.waste_by_length[n] += v


def _close(w: Waste, tally: _Tally, closed: Any, starts: Any) -> None:
    """Account the batches `closed` holds (each from one of `starts` to the next)."""
    if not closed.size:
        return
    sizes = np.diff(np.append(starts, closed.size))
    tops = np.maximum.reduceat(closed, starts)
    w.steps += int(starts.size)
    w.padded_tokens += int((tops * sizes).sum())
    if int(tops.max()) <= _DENSE_MAX:  # counted in O(n): a sort here cost a third of the run
        counted = np.bincount(tops)
        top_values = np.flatnonzero(counted)
        top_counts = counted[top_values]
    else:
        top_values, top_counts = np.unique(tops, return_counts=True)
    w.pad_to.update(dict(zip(top_values.tolist(), top_counts.tolist(), strict=True)))  # the picture's rug
    tally.add(closed, np.repeat(tops, sizes) - closed)


def _starts(rule: Rule, data: Any) -> Any:
    if rule.kind == "batch":
        return np.arange(0, data.size, rule.value)
    return budget_starts(data, rule.value)


def _take(w: Waste, tally: _Tally, rule: Rule, chunk: Chunk) -> Any:
    """The chunk's positive lengths (capped at the rule's limit), counted into `w`."""
    a = np.asarray(chunk, dtype=np.int64)
    if int(a.min(initial=1)) <= 0:
        a = a[a > 0]
    if not a.size:
        return a
    w.longest = max(w.longest, int(a.max()))  # the real longest, before the limit
    if rule.kind != "batch":
        over = a > rule.value
        if over.any():
            w.truncated += int(over.sum())
            a = np.minimum(a, rule.value)
    w.examples += int(a.size)
    w.real_tokens += int(a.sum())
    tally.add(a)
    return a


def measure(chunks: Iterable[Chunk], rule: Rule) -> Waste:
    """The padding `rule` costs on the lengths in `chunks`: waste.measure's result, computed per chunk."""
    if np is None:
        return waste.measure((int(n) for c in chunks for n in c), rule)
    w = Waste(rule)
    tally = _Tally()
    carry = np.empty(0, dtype=np.int64)
    for chunk in chunks:
        a = _take(w, tally, rule, chunk)
        if rule.kind == "packing" or not a.size:
            continue
        data = np.concatenate([carry, a]) if carry.size else a
        starts = _starts(rule, data)
        last = int(starts[-1])
        _close(w, tally, data[:last], starts[:-1])
        carry = data[last:].copy()
    if rule.kind == "packing":
        w.steps = w.real_tokens // rule.value + (1 if w.real_tokens % rule.value else 0)
        w.padded_tokens = w.real_tokens
    else:
        _close(w, tally, carry, np.zeros(1, dtype=np.int64))
    tally.into(w)
    return waste.finish(w)
