"""Which implementation transformers will really call for each fast function.

Two regimes, detected from the installed code rather than from version numbers:
- decorator (>= 5.15): `use_kernel_func_from_hub_with_fallback(name, package)` resolves the
  implementation once, at import of the modeling module; the wrapper's closure holds
  `implementation` and `is_new_implementation` (functools.wraps makes `__module__` lie).
- module-globals (<= 5.14): the modeling module imports the functions at module level and
  stores None when `is_*_available()` says no; layers fall back to `torch_*` functions.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any

from kernelcheck import matrix as matrix_mod


@dataclass(frozen=True)
class Binding:
    function: str
    package: str  # import name transformers takes it from
    bound: str  # "package" (the fast kernel), "torch" (reference path), "unbound" (not found in the module)
    implementation: str  # dotted name of the callable really used
    regime: str  # "decorator" | "module-globals"
    registered_as: str | None = None  # the name transformers registered, when it differs
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BindingResult:
    regime: str
    module: str
    bindings: dict[str, Binding]
    module_error: str | None = None  # the modeling module itself failed to import
    discovered: tuple[str, ...] = ()  # functions the installed module binds (decorator regime)


def _dotted(fn: Any) -> str:
    mod = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{mod}.{name}"


def detect_regime() -> str:
    try:
        from transformers.integrations import hub_kernels
    except Exception:
        return "module-globals"
    return "decorator" if hasattr(hub_kernels, "use_kernel_func_from_hub_with_fallback") else "module-globals"


def _wrapper_state(obj: Any) -> dict[str, Any] | None:
    """The closure of a `use_kernel_func_from_hub_with_fallback` wrapper, or None."""
    seen = 0
    while obj is not None and seen < 4:
        try:
            nl = inspect.getclosurevars(obj).nonlocals
        except (TypeError, ValueError):
            return None
        if "implementation" in nl and "func_name" in nl:
            return nl
        obj = nl.get("wrapped") or nl.get("func")  # a decorator stacked on top
        seen += 1
    return None


def _unwrap_kernels_func(obj: Any) -> Any:
    """With a `kernels` inside transformers' window, each decorated function is wrapped once more by kernels'
    `use_kernel_forward_from_hub(name)`: the module attribute is then an instance of kernels' `Func` module
    (class from kernels.layer.layer) whose forward closes over transformers' wrapper. Return that wrapper."""
    if inspect.isfunction(obj) or not hasattr(type(obj), "kernel_layer_name"):
        return obj
    try:
        inner = inspect.getclosurevars(type(obj).forward).nonlocals.get("func")
    except (TypeError, ValueError):
        return obj
    return inner if inner is not None else obj


def bind(module_name: str, functions: tuple[str, ...]) -> BindingResult:
    """Import transformers.models.<module>.modeling_<module> and read each function's binding."""
    m = matrix_mod.load()
    regime = detect_regime()
    dotted = f"transformers.models.{module_name}.modeling_{module_name}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = importlib.import_module(dotted)
    except BaseException as exc:  # noqa: BLE001 - a failing import is the finding
        return BindingResult(regime, dotted, {}, module_error=f"{type(exc).__name__}: {exc}")
    if regime == "decorator":
        return _bind_decorated(mod, dotted, functions, m)
    return _bind_globals(mod, dotted, functions, m)


def _bind_decorated(mod: Any, dotted: str, functions: tuple[str, ...], m: matrix_mod.Matrix) -> BindingResult:
    misnamed = {e["registered"]: e["function"] for e in m.transformers.get("misnamed", [])}
    found: dict[str, Binding] = {}
    discovered: list[str] = []
    for attr, obj in vars(mod).items():
        obj = _unwrap_kernels_func(obj)
        if not callable(obj) or getattr(obj, "__module__", None) != dotted:
            continue
        st = _wrapper_state(obj)
        if st is None:
            continue
        registered = st["func_name"]
        fname = misnamed.get(registered, registered)
        impl = st["implementation"]
        is_new = bool(st.get("is_new_implementation", impl is not st.get("torch_function")))
        extra = {k: repr(v) for k, v in st.items()
                 if k not in ("implementation", "func_name", "torch_function", "is_new_implementation",
                              "applicable_params", "package")}
        found[fname] = Binding(
            function=fname,
            package=st.get("package", ""),
            bound="package" if is_new else "torch",
            implementation=_dotted(impl),
            regime="decorator",
            registered_as=registered if registered != fname else None,
            extra={"attribute": attr, **extra},
        )
        discovered.append(fname)
    out = {}
    for f in dict.fromkeys((*functions, *discovered)):
        out[f] = found.get(f) or Binding(f, m.functions[f].package if f in m.functions else "", "unbound",
                                         "-", "decorator")
    return BindingResult("decorator", dotted, out, discovered=tuple(dict.fromkeys(discovered)))


def _bind_globals(mod: Any, dotted: str, functions: tuple[str, ...], m: matrix_mod.Matrix) -> BindingResult:
    out = {}
    for f in functions:
        info = m.functions.get(f)
        pkg = info.package if info else ""
        if not hasattr(mod, f):
            out[f] = Binding(f, pkg, "unbound", "-", "module-globals")
            continue
        val = getattr(mod, f)
        if val is None:
            fb = getattr(mod, info.torch_fallback, None) if info else None
            impl = _dotted(fb) if fb is not None else (info.torch_fallback if info else "torch")
            out[f] = Binding(f, pkg, "torch", impl, "module-globals")
        else:
            from_pkg = (getattr(val, "__module__", "") or "").split(".")[0] == pkg
            out[f] = Binding(f, pkg, "package" if from_pkg else "torch", _dotted(val), "module-globals")
    return BindingResult("module-globals", dotted, out)
