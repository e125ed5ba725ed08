"""The analysis' fast path: what `_Accumulator.feed` and `PhaseCollector.feed_one` do with each event, done for a
whole run of events the reader matched in torch's layout (reader._FAST), as columns, mostly in C.

The reader hands over `parts`, the flat list `_FAST.split` gives; column j of it is `parts[1 + j::FAST_STRIDE]`.
CPU ops (most of a trace) and Python functions go in bulk; GPU work and launches too when each args object holds
one int correlation id (what torch writes); anything else event by event, exactly as `feed` would. The results
are the ones the dict path gives (tests/unit/test_trace_fastpath.py compares them).
"""

from __future__ import annotations

import operator
import re
from array import array
from collections.abc import Callable, Iterable
from functools import cached_property
from itertools import compress, repeat
from typing import Any

from kernelcheck.trace import phases as phases_mod
from kernelcheck.trace import reader
from kernelcheck.trace.reader import decode_args

# GPU activity kinds in the per-activity arrays
KERNEL, MEMCPY, MEMSET = 0, 1, 2

# One correlation key with an int value, in an args object the reader matched (flat, no backslash)
_CORRELATION = re.compile(r'"correlation": (-?[0-9]+)[ \n]*[,}]')
_CORRELATION_BYTES = re.compile(_CORRELATION.pattern.encode())
_AUTOGRAD_BYTES = phases_mod.AUTOGRAD.encode()


def _correlations(texts: list[Any]) -> list[int] | None:
    """The correlation id of each args text (str or bytes), when each holds exactly one "correlation" key with
    an int value and none holds "is_user_annotation" (what torch writes): then these are what json would give.
    Else None."""
    if not all(texts):
        return None
    if type(texts[0]) is bytes:
        joined_b = b"\x00".join(texts)
        if b'"is_user_annotation"' in joined_b:
            return None
        found = _CORRELATION_BYTES.findall(joined_b)
        key: Any = b'"correlation"'
        count: Any = bytes.count
    else:
        joined = "\x00".join(texts)
        if '"is_user_annotation"' in joined:
            return None
        found = _CORRELATION.findall(joined)
        key, count = '"correlation"', str.count
    if len(found) != len(texts) or list(map(count, texts, repeat(key))).count(1) != len(texts):
        return None
    return list(map(int, found))


# the categories whose args the analysis reads (correlation ids, is_user_annotation)
_GPU_CATS = frozenset(("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"))
_LAUNCH_CATS = frozenset(("cuda_runtime", "cuda_driver"))
_ARGS_READ = _GPU_CATS | _LAUNCH_CATS
# the columns of the X events other than CPU ops and Python functions, in `_feed_other`'s order
_X_COLUMNS = (reader.X_CAT, reader.X_NAME, reader.X_TID, reader.X_TS, reader.X_DUR, reader.X_ARGS)
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


class FastFeed:
    """Mixed into the analysis' accumulator: the attributes below are its."""

    names: dict[str, int]
    cpu_ts: array[float]
    cpu_name: array[int]
    cpu_min: float
    cpu_max: float
    g_ts: array[float]
    g_dur: array[float]
    g_name: array[int]
    g_kind: array[int]
    g_corr: array[int]
    launch_end: dict[int, float]
    launches: list[float]
    py_hits: list[tuple[float, str]]
    n_events: int
    _py_rx: re.Pattern[str] | None
    _py_seen: dict[str, bool]
    _intern: Callable[[str], int]
    budget: Any  # a step budget's collector (trace/results.py BudgetFeed), or None

    @cached_property
    def _raw_ids(self) -> dict[bytes, int]:
        """A name as the file's bytes -> its index (names left undecoded)."""
        return {}

    @cached_property
    def _text_of(self) -> dict[bytes, str]:
        """A value as the file's bytes -> its text."""
        return {}

    @property
    def _handler_table(self) -> dict[str, Callable[[str, float, str, float, dict[str, Any]], None]]:
        raise NotImplementedError  # the accumulator's handler per category

    def feed_fast(self, parts: list[Any], n: int, phases: phases_mod.PhaseCollector) -> None:
        """`feed` + `phases.feed_one` for a run of `n` events the reader matched in torch's layout, as the
        columns of `parts` (reader._FAST): the same numbers from the text, with no dict per event. CPU ops (most
        of a trace) go in bulk, in C; of the args, only the correlation ids of GPU work and launches are read.
        The columns are str, or bytes where the reader did not decode the file (then names are decoded once
        each, as the decoder would have: UTF-8, bad bytes replaced)."""
        k = reader.FAST_STRIDE
        raw = type(parts[0]) is bytes

        def col(j: int) -> list[Any]:
            return parts[1 + j::k]

        cpu_ts_s = col(reader.CPU_TS)
        if len(cpu_ts_s) - cpu_ts_s.count(None):
            self._cpu_bulk(list(compress(col(reader.CPU_NAME), cpu_ts_s)), filter(None, cpu_ts_s),
                           filter(None, col(reader.CPU_DUR)), phases, raw)
        py_ts = col(reader.PY_TS)
        if self._py_rx is not None and len(py_ts) - py_ts.count(None):
            nm = list(compress(col(reader.PY_NAME), py_ts))
            self._python_bulk(self._texts(nm) if raw else nm, filter(None, py_ts))
        x_ts = col(reader.X_TS)
        if len(x_ts) - x_ts.count(None):
            columns = [list(compress(col(j), x_ts)) for j in _X_COLUMNS]
            if raw:  # cat, name, tid as text; ts and dur are read by float() as bytes, args by _correlations
                columns[0], columns[1], columns[2] = map(self._texts, columns[:3])
            self._feed_other(columns, phases)
        self.n_events += n

    def _texts(self, col: list[bytes]) -> list[str]:
        """A column of bytes as text, each distinct value decoded once."""
        cache = self._text_of
        try:
            return list(map(cache.__getitem__, col))
        except KeyError:
            for b in dict.fromkeys(col):
                if b not in cache:
                    cache[b] = b.decode("utf-8", "replace")
            return list(map(cache.__getitem__, col))

    def _ids(self, nm: list[Any], raw: bool) -> array[int]:
        """The name index of each name (str, or bytes undecoded), names seen first interned in first-seen order,
        as `feed` interns them."""
        ids = self._raw_ids if raw else self.names
        try:
            return array("i", map(ids.__getitem__, nm))
        except KeyError:
            for name in dict.fromkeys(nm):
                if name not in ids:
                    ids[name] = self._intern(name.decode("utf-8", "replace")) if raw else self._intern(name)
            return array("i", map(ids.__getitem__, nm))

    def _cpu_bulk(self, nm: list[Any], ts_s: Iterable[Any], dur_s: Iterable[Any],
                  phases: phases_mod.PhaseCollector, raw: bool = False) -> None:
        """What `feed` and `phases.feed_one` do with CPU ops, for a run's CPU ops at once."""
        ts = array("d", map(float, ts_s))
        end = array("d", map(operator.add, ts, map(float, dur_s)))
        self.cpu_ts.extend(ts)
        self.cpu_name.extend(self._ids(nm, raw))
        lo, hi = min(ts), max(end)
        if lo < self.cpu_min:
            self.cpu_min = lo
        if hi > self.cpu_max:
            self.cpu_max = hi
        ag = (list(map(bytes.startswith, nm, repeat(_AUTOGRAD_BYTES))) if raw else
              list(map(str.startswith, nm, repeat(phases_mod.AUTOGRAD))))
        if any(ag):
            phases.autograd.extend(zip(compress(ts, ag), compress(end, ag), strict=True))
        if self.budget is not None:
            self.budget.cpu_bulk(nm, ts, end)

    def _python_bulk(self, nm: list[str], ts_s: Iterable[str]) -> None:
        """What `_python` does with Python function events, for a run's at once."""
        seen, rx = self._py_seen, self._py_rx
        for name in dict.fromkeys(nm):  # as _python, once per name
            if name not in seen:
                seen[name] = bool(rx.match(name))  # type: ignore[union-attr]
        hits = list(map(seen.__getitem__, nm))
        if any(hits):
            self.py_hits.extend(compress(zip(map(float, ts_s), nm, strict=True), hits))

    def _feed_other(self, columns: list[list[Any]], phases: phases_mod.PhaseCollector) -> None:
        """The X events other than CPU ops and Python functions of a fast run, as columns (cat, name, tid, ts, dur,
        args text): what `_gpu`, `_launch` and `phases.take` do with them. GPU work and launches whose args each
        hold one int correlation id (what torch writes) go in bulk; anything else event by event."""
        cats, nm, tids, ts_s, dur_s, args = columns
        is_gpu = list(map(_GPU_CATS.__contains__, cats))
        is_launch = list(map(_LAUNCH_CATS.__contains__, cats))
        n_gpu, n_launch = is_gpu.count(True), is_launch.count(True)
        if n_gpu + n_launch < len(cats):
            rest = list(map(operator.not_, map(operator.or_, is_gpu, is_launch)))
            self._feed_rows(list(compress(zip(cats, nm, tids, ts_s, dur_s, args, strict=True), rest)), phases)
        for mask, count, bulk in ((is_gpu, n_gpu, self._gpu_bulk), (is_launch, n_launch, self._launch_bulk)):
            if not count:
                continue
            cols = [list(compress(c, mask)) for c in columns] if count < len(mask) else columns
            corrs = _correlations(cols[5])
            if corrs is not None:
                bulk(cols[0], cols[1], cols[2], cols[3], cols[4], corrs, phases)
            else:
                self._feed_rows(list(zip(*cols, strict=True)), phases)

    def _gpu_bulk(self, cats: list[str], nm: list[str], tids: list[str], ts_s: list[str], dur_s: list[str],
                  corrs: list[int], phases: phases_mod.PhaseCollector) -> None:
        """`_gpu` and `phases.take` for GPU work whose args hold one int correlation id each and no
        is_user_annotation."""
        ts = array("d", map(float, ts_s))
        dur = array("d", map(float, dur_s))
        kind_of: dict[tuple[str, str], int] = {}
        for cat, name in dict.fromkeys(zip(cats, nm, strict=True)):
            kind_of[(cat, name)] = (MEMCPY if cat in ("gpu_memcpy", "Memcpy") or name.startswith("Memcpy") else
                                    MEMSET if cat in ("gpu_memset", "Memset") or name.startswith("Memset") else
                                    KERNEL)
        self.g_ts.extend(ts)
        self.g_dur.extend(dur)
        self.g_name.extend(self._ids(nm, False))
        self.g_kind.extend(array("b", map(kind_of.__getitem__, zip(cats, nm, strict=True))))
        if min(corrs) >= -(2**63) and max(corrs) < 2**63:
            self.g_corr.extend(array("q", corrs))
        else:
            self.g_corr.extend(array("q", (c if -(2**63) <= c < 2**63 else -1 for c in corrs)))
        in_phases = list(map(phases_mod.CATS.__contains__, cats))
        is_kernel = map(operator.eq, cats, repeat("kernel"))
        phases.gpu.extend(compress(zip(ts, dur, corrs, is_kernel, strict=False), in_phases))

    def _launch_bulk(self, cats: list[str], nm: list[str], tids: list[str], ts_s: list[str], dur_s: list[str],
                     corrs: list[int], phases: phases_mod.PhaseCollector) -> None:
        """`_launch` and `phases.take` for cuda_runtime/cuda_driver calls whose args hold one int correlation id
        each."""
        ts = list(map(float, ts_s))
        dur = map(float, dur_s)
        flags = {n: ("aunch" in n or "emcpy" in n or "emset" in n, "aunch" in n) for n in dict.fromkeys(nm)}
        gpu_work = list(map(_FIRST, map(flags.__getitem__, nm)))
        if any(gpu_work):
            self.launch_end.update(compress(zip(corrs, map(operator.add, ts, dur), strict=False), gpu_work))
            self.launches.extend(compress(ts, map(_SECOND, map(flags.__getitem__, nm))))
        if self.budget is not None:
            self.budget.sync_bulk(nm, ts, map(float, dur_s))
        tids_v = [int(t) if t[0] != '"' else t[1:-1] for t in tids]
        phases.launch.update(zip(corrs, zip(ts, tids_v, strict=True), strict=True))

    def _feed_rows(self, rows: list[tuple[Any, ...]],
                   phases: phases_mod.PhaseCollector) -> None:
        """Event by event, as `feed` does: the handler, then `phases.take`."""
        handlers = self._handler_table
        cats = phases_mod.CATS
        args_of = iter([decode_args(r[5] if type(r[5]) is not bytes else r[5].decode("utf-8", "replace"))
                        if r[5] else {} for r in rows if r[0] in _ARGS_READ])
        for cat, name, tid, ts_s, dur_s, _ in rows:
            handler = handlers.get(cat)
            if cat in _ARGS_READ:
                args = next(args_of)
            elif handler is None and cat not in cats:
                continue
            else:
                args = {}
            t, d = float(ts_s), float(dur_s)
            if handler is not None:
                handler(cat, t, name, d, args)
            if cat in cats:
                phases.take(cat, name, t, d, int(tid) if tid[0] != '"' else tid[1:-1], args)
