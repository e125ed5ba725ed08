"""Record which implementation of each fast function really runs, without replacing it.

The modeling module's function globals (decorator regime, transformers >= 5.15) or the layers'
function attributes (module-globals regime, <= 5.14) are wrapped for the duration of a run:
- the real transformers wrapper still runs and still picks the implementation; kernelcheck swaps the
  wrapper's closure cells `implementation` and `torch_function` for thin recorders, so whichever
  callable really executes writes its own name into the call record (5.25's per-call device check
  included);
- each call is a `torch.profiler.record_function` range `kernelcheck::<function>::<step>::L<layer>`, so
  the profiler trace says which CPU ops and GPU kernels it caused;
- in training, identity autograd nodes around the call open and close a `...::backward` range, so the
  backward kernels are attributed too, and an exception raised in a backward names its function;
- "forcing" a function calls its torch reference (`torch_function`) directly: that is exactly what
  transformers runs when the package is absent, used for the reference comparison and the benchmark.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelcheck.integrations.transformers import Binding

RANGE_PREFIX = "kernelcheck::"


@dataclass
class CallRecord:
    """One call of a fast function, filled in while it runs."""

    function: str
    step: str
    layer: int | None
    index: int
    forced: bool
    implementation: str = "?"
    fast: bool = False
    error: str | None = None
    error_phase: str | None = None  # forward | backward
    nonfinite: bool = False

    @property
    def range_name(self) -> str:
        return f"{RANGE_PREFIX}{self.function}::{self.step}::L{'-' if self.layer is None else self.layer}#{self.index}"


@dataclass
class Hook:
    """How one function is reached: the module attribute (decorator) or layer attributes (old regime)."""

    function: str
    package: str
    original: Callable[..., Any] | None  # the callable transformers bound (its wrapper in the decorator regime)
    torch_function: Callable[..., Any] | None  # the reference path; None when it is inline code (old conv prefill)
    fast_bound: bool
    cells: dict[str, Any] = field(default_factory=dict)  # closure cells: implementation, torch_function
    attribute: str = ""
    inline: str = ""  # old regime: the reference is inline code in this layer method (nothing to wrap)


def dotted(fn: Any) -> str:
    """module.qualname of a callable (called on the real implementation, never on a functools.wraps wrapper)."""
    mod = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{mod}.{name}"


def _closure_cells(fn: Any) -> dict[str, Any]:
    """The cells of the `use_kernel_func_from_hub_with_fallback` wrapper inside `fn`'s decorator stack."""
    seen = 0
    obj = fn
    while obj is not None and seen < 6:
        code = getattr(obj, "__code__", None)
        if code is None and callable(getattr(type(obj), "forward", None)):
            # kernels >= 0.19 turns a decorated function into an nn.Module instance whose forward calls it
            obj = type(obj).forward
            seen += 1
            continue
        clo = getattr(obj, "__closure__", None)
        if code is None or clo is None:
            return {}
        cells = dict(zip(code.co_freevars, clo, strict=False))
        if "implementation" in cells and "torch_function" in cells:
            return cells
        nxt = None
        for key in ("wrapped", "func", "fn", "function"):
            if key in cells:
                try:
                    nxt = cells[key].cell_contents
                except ValueError:
                    nxt = None
                break
        obj = nxt or getattr(obj, "__wrapped__", None)
        seen += 1
    return {}


closure_cells = _closure_cells  # verify/packing_reach.py reads the same cells


def _autograd_marks() -> tuple[Any, Any]:
    """Identity autograd nodes: `Start` (on a call's outputs) runs first in backward and opens the call's
    backward range; `End` (on its inputs) runs after the call's own backward and closes it."""
    import torch

    def mark(hook: str) -> Any:
        class Mark(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, inst: Instrument, idx: int, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
                ctx.inst, ctx.idx = inst, idx
                return tuple(t.view_as(t) for t in tensors)

            @staticmethod
            def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
                getattr(ctx.inst, hook)(ctx.idx)
                return (None, None, *grads)

        return Mark

    return mark("_bwd_start"), mark("_bwd_end")


def _caller_layer() -> int | None:
    """`self.layer_idx` of the layer whose forward called the function (two frames up)."""
    f = sys._getframe(2)
    for _ in range(3):
        if f is None:
            return None
        obj = f.f_locals.get("self")
        idx = getattr(obj, "layer_idx", None)
        if isinstance(idx, int):
            return idx
        f = f.f_back  # type: ignore[assignment]
    return None


def _tensors(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


def _nonfinite(out: Any) -> bool:
    import torch

    return any(t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()) for t in _tensors(out))


class Instrument:
    """Wrap the fast functions of one modeling module (or model instance) while `active`."""

    def __init__(self, module_name: str, bindings: dict[str, Binding], model: Any, regime: str,
                 torch_fallbacks: dict[str, str] | None = None, aliases: dict[str, tuple[str, ...]] | None = None):
        self.module = importlib.import_module(module_name)
        self.model = model
        self.regime = regime
        self.step = "?"
        self.records: list[CallRecord] = []
        self.forced: set[str] = set()
        # first prefill call's inputs, for the direct comparison
        self.capture: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.capture_steps: set[str] = set()
        self.mark_backward = False
        self.profiling = False
        self.check_values = False
        self.bwd_current: CallRecord | None = None
        self._open: dict[int, Any] = {}
        self._stack = threading.local()
        self._restore: list[Callable[[], None]] = []
        self.hooks: dict[str, Hook] = {}
        self._start, self._end = _autograd_marks()
        self._fallbacks = torch_fallbacks or {}
        self._aliases = aliases or {}
        for fn, b in bindings.items():
            if b.bound == "unbound":
                continue
            if regime == "decorator":
                attr = b.extra.get("attribute", "")
                orig = getattr(self.module, attr, None) if attr else None
                if orig is None:
                    continue
                cells = _closure_cells(orig)
                tf = cells["torch_function"].cell_contents if cells else None
                self.hooks[fn] = Hook(fn, b.package, orig, tf, b.bound == "package", cells, attr)
            else:
                tf = getattr(self.module, self._fallbacks.get(fn, ""), None)
                self.hooks[fn] = Hook(fn, b.package, None, tf, b.bound == "package", {}, fn)

    # -- patching ---------------------------------------------------------------------------------
    def __enter__(self) -> Instrument:
        for _fn, hook in self.hooks.items():
            if self.regime == "decorator":
                self._patch_module(hook)
            else:
                self._patch_layers(hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._restore:
            self._restore.pop()()

    def _patch_module(self, hook: Hook) -> None:
        tf = self._recorder(hook.torch_function, False) if hook.torch_function else None
        outer = self._outer(hook, hook.original, tf)
        setattr(self.module, hook.attribute, outer)
        self._restore.append(lambda: setattr(self.module, hook.attribute, hook.original))
        for name in ("implementation", "torch_function"):
            cell = hook.cells.get(name)
            if cell is None:
                continue
            real = cell.cell_contents
            is_fast = name == "implementation" and real is not hook.torch_function
            cell.cell_contents = self._recorder(real, is_fast)
            self._restore.append(functools.partial(setattr, cell, "cell_contents", real))

    def _patch_layers(self, hook: Hook) -> None:
        # <= 5.14: each layer stores the function (or None for the inline conv) on itself at init, sometimes
        # under another name (`self.recurrent_gated_delta_rule = fused_recurrent_gated_delta_rule or ...`).
        names = (hook.function, *self._aliases.get(hook.function, ()))
        for mod in self.model.modules():
            attr = next((n for n in names if n in vars(mod)), None)
            if attr is None:
                continue
            real = vars(mod)[attr]
            if real is None:
                hook.inline = f"{type(mod).__name__}.forward (its `{attr}` is None)"
                continue  # inline torch code: nothing to wrap; the evidence says so
            if hook.original is None:
                hook.original = real
            is_fast = (getattr(real, "__module__", "") or "").split(".")[0] == hook.package
            rec = self._recorder(real, is_fast)
            tf = self._recorder(hook.torch_function, False) if hook.torch_function else None
            setattr(mod, attr, self._outer(hook, rec, tf))
            self._restore.append(functools.partial(setattr, mod, attr, real))

    def _recorder(self, real: Callable[..., Any], is_fast: bool) -> Callable[..., Any]:
        name = dotted(real)

        @functools.wraps(real)
        def recorder(*args: Any, **kwargs: Any) -> Any:
            stack = getattr(self._stack, "items", None)
            if stack:
                stack[-1].implementation = name
                stack[-1].fast = is_fast
            return real(*args, **kwargs)

        return recorder

    def _outer(self, hook: Hook, call: Callable[..., Any] | None,
               torch_call: Callable[..., Any] | None) -> Callable[..., Any]:
        import torch

        def outer(*args: Any, **kwargs: Any) -> Any:
            forced = hook.function in self.forced and torch_call is not None
            rec = CallRecord(hook.function, self.step, _caller_layer(), len(self.records), forced)
            self.records.append(rec)
            target = torch_call if forced else call
            if self.step in self.capture_steps and hook.function not in self.capture:
                self.capture[hook.function] = _clone_args(args, kwargs)
            marking = self.mark_backward and torch.is_grad_enabled()
            if marking:
                args, kwargs = self._mark_inputs(rec.index, args, kwargs)
            stack = getattr(self._stack, "items", None)
            if stack is None:
                stack = self._stack.items = []
            stack.append(rec)
            try:
                with torch.profiler.record_function(rec.range_name):
                    out = target(*args, **kwargs)  # type: ignore[misc]
            except Exception as exc:
                rec.error, rec.error_phase = f"{type(exc).__name__}: {exc}", "forward"
                raise
            finally:
                stack.pop()
            if self.check_values:
                # NaN/Inf is blamed on the first function that makes it from finite inputs, not on everything
                # after it. Only in the unprofiled first pass: each check synchronises with the GPU, which would
                # distort the profiled GPU idle time and the benchmark.
                rec.nonfinite = _nonfinite(out) and not _nonfinite((args, tuple(kwargs.values())))
            if marking:
                out = self._mark_outputs(rec.index, out)
            return out

        functools.update_wrapper(outer, hook.original or call or torch_call)  # type: ignore[arg-type]
        return outer

    # -- backward attribution -----------------------------------------------------------------------
    def _mark_inputs(self, idx: int, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        import torch

        flat: list[tuple[int | str, Any]] = [(i, a) for i, a in enumerate(args)] + list(kwargs.items())
        grads = [(k, v) for k, v in flat if isinstance(v, torch.Tensor) and v.requires_grad]
        if not grads:
            return args, kwargs
        marked = self._end.apply(self, idx, *[v for _, v in grads])
        new = dict(zip([k for k, _ in grads], marked, strict=False))
        return (tuple(new.get(i, a) for i, a in enumerate(args)),
                {k: new.get(k, v) for k, v in kwargs.items()})

    def _mark_outputs(self, idx: int, out: Any) -> Any:
        import torch

        items = list(out) if isinstance(out, tuple) else [out]
        pos = [i for i, t in enumerate(items) if isinstance(t, torch.Tensor) and t.requires_grad]
        if not pos:
            return out
        marked = self._start.apply(self, idx, *[items[i] for i in pos])
        for i, t in zip(pos, marked, strict=False):
            items[i] = t
        return tuple(items) if isinstance(out, tuple) else items[0]

    def _bwd_start(self, idx: int) -> None:
        if idx in self._open:
            return
        rec = self.records[idx]
        self.bwd_current = rec
        rf = None
        if self.profiling:
            import torch

            rf = torch.profiler.record_function(rec.range_name + "::backward")
            rf.__enter__()  # type: ignore[no-untyped-call]  # torch's record_function.__enter__ is unannotated
        self._open[idx] = rf

    def _bwd_end(self, idx: int) -> None:
        rf = self._open.get(idx, False)
        if rf is False or rf == "closed":
            return
        if rf is not None:
            rf.__exit__(None, None, None)
        self._open[idx] = "closed"
        if self.bwd_current is not None and self.bwd_current.index == idx:
            self.bwd_current = None

    def blame_backward(self, exc: BaseException) -> CallRecord | None:
        """The call whose backward raised `exc`: the open backward range, else the traceback's package."""
        rec = self.bwd_current
        if rec is None:
            pkgs = _packages_in_traceback(exc)
            for r in reversed(self.records):
                if r.fast and self.hooks[r.function].package in pkgs and r.step == "train":
                    rec = r
                    break
        if rec is not None:
            rec.error, rec.error_phase = f"{type(exc).__name__}: {exc}", "backward"
        return rec

    def reset(self) -> None:
        """Forget calls (between steps/attempts); patches stay in place."""
        self.records = []
        self.bwd_current = None
        self._open = {}

    # -- direct comparison --------------------------------------------------------------------------
    def captured_call(self, function: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A copy of the captured first prefill call's arguments (a control may change them)."""
        return _clone_args(*self.capture[function])

    def call_direct(self, function: str, reference: bool) -> Any:
        """Call the captured first prefill call again, through the bound path or the torch reference."""
        args, kwargs = _clone_args(*self.capture[function])
        hook = self.hooks[function]
        if reference:
            return hook.torch_function(*args, **kwargs)  # type: ignore[misc]
        return (hook.original or hook.torch_function)(*args, **kwargs)  # type: ignore[misc]


def _clone_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    def c(v: Any) -> Any:
        return v.detach().clone() if isinstance(v, torch.Tensor) else v

    return tuple(c(a) for a in args), {k: c(v) for k, v in kwargs.items()}


def _packages_in_traceback(exc: BaseException) -> set[str]:
    out = set()
    tb = exc.__traceback__
    while tb is not None:
        mod = tb.tb_frame.f_globals.get("__name__", "") or ""
        out.add(mod.split(".")[0])
        tb = tb.tb_next
    return out
