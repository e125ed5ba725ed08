"""Phases (forward / backward / optimizer) and layer types of a whole training step, from the trace.

Where the trace marks them:
- `kernelcheck::phase::<name>` ranges (written by `verify --step`) are the phases;
- otherwise torch's own marks: `Optimizer.step#...` ranges (optimizer) and the autograd engine's
  `autograd::engine::evaluate_function: ...` ops (backward, from the first to the last of them in a
  step); forward is what precedes the backward in the step;
- `kernelcheck::layer::<type>::L<i>` ranges (forward) and `...::backward` give the cost per layer type.

A kernel belongs to the range whose CPU side launched it (the launch call with its correlation id):
phases by time window (they follow one another on the main thread; the backward's launches come from
the autograd thread), layer ranges by thread and time (innermost first). A layer range's cost is its
share of the GPU timeline (trace/gpushare.py): the time its kernels ran plus the idle gaps the GPU spent
waiting for its launches, never its CPU time, which on a deep queue holds waits for other layers' work.
Without GPU events (a CPU run) the cost is the range's CPU time. Each layer type also carries its cost
per profiled step (`per_step_ms`, per layer), the spread a projection inherits.
"""

from __future__ import annotations

import bisect
import json
import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from kernelcheck.trace import gpushare
from kernelcheck.trace.reader import gc_paused

LAYER_PREFIX = "kernelcheck::layer::"
PHASE_PREFIX = "kernelcheck::phase::"
AUTOGRAD = "autograd::engine::evaluate_function"
CATS = frozenset(("user_annotation", "cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy",
                   "gpu_memset"))
_GPU = frozenset(("kernel", "gpu_memcpy", "gpu_memset"))
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_KERNELS, _KERNEL_US = operator.attrgetter("kernels"), operator.attrgetter("kernel_us")
_BUSY_US, _IDLE_US = operator.attrgetter("busy_us"), operator.attrgetter("idle_us")


@dataclass(slots=True)
class _Range:
    name: str
    ts: float
    end: float
    tid: Any
    kernels: int = 0
    gpu_us: float = 0.0
    busy_us: float = 0.0
    idle_us: float = 0.0

    def add(self, s: gpushare.Share) -> None:
        self.kernels += s.kernels
        self.gpu_us += s.kernel_us
        self.busy_us += s.busy_us
        self.idle_us += s.idle_us

    def add_all(self, shares: list[gpushare.Share]) -> None:
        """`add` each in turn (the same float sums, in the same order), in C."""
        if shares:
            self.kernels += sum(map(_KERNELS, shares))
            self.gpu_us = reduce(operator.add, map(_KERNEL_US, shares), self.gpu_us)
            self.busy_us = reduce(operator.add, map(_BUSY_US, shares), self.busy_us)
            self.idle_us = reduce(operator.add, map(_IDLE_US, shares), self.idle_us)


def _thread(tid: Any) -> int | str:
    """A thread id as a key: the profiler writes an int (or a string); anything else a hostile or hand-made trace
    holds (a list, a dict, null) becomes its JSON text, so it is hashable and compares equal to itself only."""
    if isinstance(tid, (int, str)) and not isinstance(tid, bool):
        return tid
    return json.dumps(tid, default=str, sort_keys=True)


@dataclass
class PhaseCollector:
    """Streams events once; keeps ranges, launches and kernel durations (a few numbers each)."""

    phases: list[_Range] = field(default_factory=list)
    layers: list[_Range] = field(default_factory=list)
    steps: list[_Range] = field(default_factory=list)
    optim: list[_Range] = field(default_factory=list)
    autograd: list[tuple[float, float]] = field(default_factory=list)
    launch: dict[int, tuple[float, Any]] = field(default_factory=dict)
    gpu: list[tuple[float, float, int, bool]] = field(default_factory=list)  # (ts, dur, correlation, kernel?)

    def feed(self, events: Iterable[Mapping[str, Any]]) -> None:
        for ev in events:
            self.feed_one(ev)

    def passing(self, events: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
        """Yield the events on while collecting from them (one streaming pass for two readers)."""
        for ev in events:
            self.feed_one(ev)
            yield ev

    def feed_one(self, ev: Mapping[str, Any]) -> None:
        if ev.get("ph") != "X":
            return
        cat = ev.get("cat")
        if cat not in CATS:
            return
        if cat == "cpu_op" and not str(ev.get("name", "")).startswith(AUTOGRAD):
            return
        ts, dur, name = ev.get("ts"), ev.get("dur") or 0.0, ev.get("name")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or not isinstance(name, str):
            return
        self.take(cat, name, float(ts), float(dur), ev.get("tid"), ev.get("args"))

    def _annotation(self, name: str, ts: float, dur: float, tid: Any) -> None:
        """Keep a user_annotation range that marks a phase, a layer, a profiler step or an optimizer step."""
        r = _Range(name, ts, ts + dur, _thread(tid))
        if name.startswith(PHASE_PREFIX):
            self.phases.append(r)
        elif name.startswith(LAYER_PREFIX):
            self.layers.append(r)
        elif name.startswith("ProfilerStep#"):
            self.steps.append(r)
        elif name.startswith("Optimizer.step#"):
            self.optim.append(r)

    def take(self, cat: Any, name: str, ts: float, dur: float, tid: Any, args: Any) -> None:
        """One X event of a category in CATS, its fields read (`tid` and `args` as the event holds them)."""
        # per event on multi-GB traces: only annotations (a few per step) take the extra call
        if cat == "user_annotation":
            self._annotation(name, ts, dur, tid)
        elif cat == "cpu_op" and name.startswith(AUTOGRAD):
            self.autograd.append((ts, ts + dur))
        elif cat in ("cuda_runtime", "cuda_driver"):  # launches, memcpy/memset calls: any with GPU work
            corr = args.get("correlation") if isinstance(args, Mapping) else None
            if type(corr) is int:
                self.launch[corr] = (ts, _thread(tid))
        elif cat in _GPU:
            args = args or {}
            corr = args.get("correlation") if isinstance(args, Mapping) else None
            # GPU work with no correlation still moves the timeline (-1: nobody's launch)
            self.gpu.append((ts, dur, corr if type(corr) is int else -1, cat == "kernel"))

    # -- results ----------------------------------------------------------------------------------
    def _phase_ranges(self) -> list[_Range]:
        if self.phases:
            return [_Range(r.name[len(PHASE_PREFIX):], r.ts, r.end, r.tid) for r in self.phases]
        out: list[_Range] = []
        windows = self.steps or ([_Range("trace", min(a for a, _ in self.autograd), max(b for _, b in self.autograd),
                                         None)] if self.autograd else [])
        for st in windows:
            ag = [(a, b) for a, b in self.autograd if st.ts <= a <= st.end]
            op = [o for o in self.optim if st.ts <= o.ts <= st.end]
            if not ag and not op:
                continue
            b0 = min(a for a, _ in ag) if ag else (op[0].ts if op else st.end)
            b1 = max(b for _, b in ag) if ag else b0
            out.append(_Range("forward", st.ts, b0, None))
            if ag:
                out.append(_Range("backward", b0, b1, None))
            out.extend(_Range("optimizer", o.ts, o.end, None) for o in op)
        return out

    def result(self) -> dict[str, Any]:
        """{"phases": {name: {ms, kernels, gpu_ms, ranges}}, "layer_types": {type: {...}}, "marked_by": ...}."""
        with gc_paused():
            return self._result()

    def _result(self) -> dict[str, Any]:
        phases = self._phase_ranges()
        if not phases and not self.layers:
            return {}
        # (ts, correlation, tid) sorted by (ts, correlation): correlation ids are distinct, tid never compared
        launches = sorted(zip(map(_FIRST, self.launch.values()), self.launch.keys(),
                              map(_SECOND, self.launch.values()), strict=True))
        by_corr = gpushare.shares(self.gpu)
        self._attribute_windows(phases, launches, by_corr)
        self._attribute_layers(launches, by_corr)
        busy, idle = gpushare.totals(by_corr)
        return {"marked_by": "kernelcheck" if self.phases else ("torch" if phases else None),
                "phases": _sum_by(phases, lambda r: r.name),
                "layer_types": self._layer_types(bool(self.gpu)),
                "profiled_steps": len(self.steps),
                "gpu": {"busy_ms": round(busy / 1000, 3), "idle_ms": round(idle / 1000, 3)} if self.gpu else None,
                "cost_by": "gpu timeline share" if self.gpu else "cpu time"}

    @staticmethod
    def _attribute_windows(ranges: list[_Range], launches: list[tuple[float, int, Any]],
                           by_corr: Mapping[int, gpushare.Share]) -> None:
        ts = list(map(_FIRST, launches))
        corrs = list(map(_SECOND, launches))
        for r in ranges:
            lo, hi = bisect.bisect_left(ts, r.ts), bisect.bisect_right(ts, r.end)
            r.add_all(list(filter(None, map(by_corr.get, corrs[lo:hi]))))

    def _attribute_layers(self, launches: list[tuple[float, int, Any]],
                          by_corr: Mapping[int, gpushare.Share]) -> None:
        if not self.layers:
            return
        by_tid: dict[Any, list[_Range]] = defaultdict(list)
        for r in self.layers:
            by_tid[r.tid].append(r)
        for rs in by_tid.values():
            rs.sort(key=lambda r: r.ts)
        got = _innermost(by_tid, launches, by_corr)
        for r in self.layers:
            shares = got.get(id(r))
            if shares:
                r.add_all(shares)

    def _layer_types(self, on_gpu: bool) -> dict[str, Any]:
        bwd = [r for r in self.layers if r.name.endswith("::backward")]
        fwd = [r for r in self.layers if not r.name.endswith("::backward")
               and not any(b.ts <= r.ts <= b.end for b in bwd)]  # a forward inside a backward: recompute
        recompute = len(self.layers) - len(bwd) - len(fwd)
        out: dict[str, Any] = {}
        starts = sorted(s.ts for s in self.steps)
        for pass_name, rs in (("forward", fwd), ("backward", bwd)):
            for r in rs:
                typ, layer = _type_and_layer(r.name)
                e = out.setdefault(typ, {"layers": set(), "forward": _zero(), "backward": _zero(), "steps": {}})
                e["layers"].add(layer)
                cost = (r.busy_us + r.idle_us) if on_gpu else (r.end - r.ts)
                p = e[pass_name]
                p["ranges"] += 1
                p["cpu_ms"] += (r.end - r.ts) / 1000
                p["gpu_ms"] += r.gpu_us / 1000
                p["idle_ms"] += r.idle_us / 1000
                p["kernels"] += r.kernels
                p["cost_ms"] += cost / 1000
                step = max(0, bisect.bisect_right(starts, r.ts) - 1)
                e["steps"][step] = e["steps"].get(step, 0.0) + cost / 1000
        for e in out.values():
            e["layers"] = len(e["layers"])
            e["per_step_ms"] = [round(v / e["layers"], 3) for _, v in sorted(e.pop("steps").items())]
            for p in ("forward", "backward"):
                e[p] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in e[p].items()}
        if out:
            out["_recompute_ranges"] = recompute
        return out


def _innermost(by_tid: Mapping[Any, list[_Range]], launches: list[tuple[float, int, Any]],
               by_corr: Mapping[int, gpushare.Share]) -> dict[int, list[gpushare.Share]]:
    """id of a range -> the shares of the launches it holds innermost (ranges of the launch's thread, sorted by
    start), in launch order."""
    starts = {tid: [r.ts for r in rs] for tid, rs in by_tid.items()}
    got: dict[int, list[gpushare.Share]] = defaultdict(list)
    right = bisect.bisect_right
    for ts, corr, tid in launches:
        rs = by_tid.get(tid)
        s = by_corr.get(corr) if rs is not None else None
        if s is None or rs is None:
            continue
        k = right(starts[tid], ts) - 1
        # innermost range holding the launch: walk back over ranges that started earlier
        while k >= 0 and rs[k].end < ts:
            k -= 1
        if k >= 0:
            got[id(rs[k])].append(s)
    return got


def _type_and_layer(name: str) -> tuple[str, str]:
    typ, _, rest = name[len(LAYER_PREFIX):].partition("::")
    return typ, rest.split("::")[0]


def _zero() -> dict[str, Any]:
    return {"ranges": 0, "cpu_ms": 0.0, "gpu_ms": 0.0, "idle_ms": 0.0, "kernels": 0, "cost_ms": 0.0}


def _sum_by(ranges: list[_Range], key: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in ranges:
        e = out.setdefault(key(r), {"ranges": 0, "ms": 0.0, "kernels": 0, "gpu_ms": 0.0})
        e["ranges"] += 1
        e["ms"] += (r.end - r.ts) / 1000
        e["kernels"] += r.kernels
        e["gpu_ms"] += r.gpu_us / 1000
    return {k: {kk: (round(v, 3) if isinstance(v, float) else v) for kk, v in e.items()} for k, e in out.items()}


def collect(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    c = PhaseCollector()
    c.feed(events)
    return c.result()
