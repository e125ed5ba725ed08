"""Which packing keys reach which kernel: the bound implementations wrapped for one forward.

Two points per function, so a key lost on the way shows where it was lost (slime#1686: cu_seqlens reached the
Gated DeltaNet kernel but not the conv):
- `received`: what the modeling code passed the function transformers bound (its decorated wrapper, a module
  global of the modeling module: causal_conv1d_fn, causal_conv1d_update, torch_chunk_gated_delta_rule ...);
- `passed`: what the implementation really got, after transformers' wrapper kept only the keyword arguments the
  implementation declares (the closure cell `implementation`, as verify/instrument.py swaps it).
The attention kernel is the model's attention interface (sdpa, flash, ... from ALL_ATTENTION_FUNCTIONS, or the
module's eager function); it has no filter, so what it received is what it got.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelcheck.integrations.transformers import Binding
from kernelcheck.report.packing_batch import FunctionReach
from kernelcheck.verify.instrument import closure_cells, dotted

log = logging.getLogger(__name__)
WATCH = ("cu_seqlens", "cu_seq_lens_q", "cu_seq_lens_k", "seq_idx")
ATTENTION = "attention"


def _present(kwargs: dict[str, Any]) -> set[str]:
    return {k for k in WATCH if kwargs.get(k) is not None}


@dataclass
class _Seen:
    ran: str = "?"  # dotted name of the callable that ran
    fast: bool = False
    calls: int = 0
    received: set[str] = field(default_factory=set)
    passed: set[str] = field(default_factory=set)
    error: str | None = None
    traced: bool = True


class Reach:
    """Wrap the functions of `bindings` (decorator regime) and the attention interface while active."""

    def __init__(self, module_name: str, bindings: dict[str, Binding], attn_implementation: str | None):
        self.module = importlib.import_module(module_name)
        self.bindings = {f: b for f, b in bindings.items() if b.bound != "unbound" and b.extra.get("attribute")}
        self.attn = attn_implementation or "eager"
        self.seen: dict[str, _Seen] = {}
        self._restore: list[Callable[[], None]] = []

    def __enter__(self) -> Reach:
        for fn, b in self.bindings.items():
            attr = b.extra["attribute"]
            orig = getattr(self.module, attr, None)
            if orig is None:
                log.info("reach: %s has no %s; its calls are not recorded", self.module.__name__, attr)
                continue
            cells = closure_cells(orig)
            if "implementation" not in cells:
                log.info("reach: %s's wrapper has no implementation cell; what reached it is not recorded", fn)
                self._entry(fn).traced = False
            impl_cell = cells.get("implementation")
            tf_cell = cells.get("torch_function")
            real = impl_cell.cell_contents if impl_cell is not None else orig
            fast = tf_cell is not None and real is not tf_cell.cell_contents
            self._wrap_attr(self.module, attr, orig, fn, outer=True)
            if impl_cell is not None:
                impl_cell.cell_contents = self._inner(fn, real, fast)
                self._restore.append(functools.partial(setattr, impl_cell, "cell_contents", real))
        self._wrap_attention()
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._restore:
            self._restore.pop()()

    def _entry(self, fn: str) -> _Seen:
        return self.seen.setdefault(fn, _Seen())

    def _wrap_attr(self, owner: Any, attr: str, orig: Callable[..., Any], fn: str, outer: bool) -> None:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            e = self._entry(fn)
            e.calls += 1
            e.received |= _present(kwargs)
            if not outer:  # the attention: no filter between the model and the implementation
                e.passed |= _present(kwargs)
                e.ran, e.fast = dotted(orig), fn != ATTENTION or self.attn.startswith("flash")
            try:
                return orig(*args, **kwargs)
            except Exception as exc:
                e.error = e.error or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                raise

        functools.update_wrapper(wrapper, orig)
        setattr(owner, attr, wrapper)
        self._restore.append(functools.partial(setattr, owner, attr, orig))

    def _inner(self, fn: str, real: Callable[..., Any], fast: bool) -> Callable[..., Any]:
        name = dotted(real)

        @functools.wraps(real)
        def inner(*args: Any, **kwargs: Any) -> Any:
            e = self._entry(fn)
            e.ran, e.fast = name, fast
            e.passed |= _present(kwargs)
            return real(*args, **kwargs)

        return inner

    def _wrap_attention(self) -> None:
        if self.attn == "eager":
            orig = getattr(self.module, "eager_attention_forward", None)
            if orig is not None:
                self._wrap_attr(self.module, "eager_attention_forward", orig, ATTENTION, outer=False)
            return
        table = getattr(self.module, "ALL_ATTENTION_FUNCTIONS", None)
        local = getattr(table, "_local_mapping", None)
        if table is None or local is None:
            return
        try:
            orig = table[self.attn]
        except KeyError:
            return
        had = self.attn in local
        self._wrap_attr(_Mapping(local), self.attn, orig, ATTENTION, outer=False)
        if not had:
            self._restore[-1] = functools.partial(local.pop, self.attn, None)

    def result(self) -> list[FunctionReach]:
        """Per function (in a fixed order: the bound functions, then the attention)."""
        called = [f for f, e in self.seen.items() if e.calls]
        names = [*sorted(f for f in called if f != ATTENTION), *([ATTENTION] if ATTENTION in called else [])]
        out = []
        for f in names:
            e = self.seen[f]
            impl = e.ran
            if impl == "?" and f in self.bindings:
                impl, e.fast = self.bindings[f].implementation, self.bindings[f].bound == "package"
            out.append(FunctionReach(f, impl, e.fast, e.calls, tuple(k for k in WATCH if k in e.received),
                                     tuple(k for k in WATCH if k in e.passed), e.error, e.traced))
        return out


class _Mapping:
    """setattr/getattr over a dict (the attention interface's local table), so one wrapper code serves both."""

    _d: dict[str, Any]

    def __init__(self, d: dict[str, Any]):
        object.__setattr__(self, "_d", d)

    def __setattr__(self, key: str, value: Any) -> None:
        self._d[key] = value
