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
import importlib.util
import inspect
import re
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
    """Read the installed source (no import: a broken dependency must not change the answer)."""
    try:
        spec = importlib.util.find_spec("transformers.integrations.hub_kernels")
        with open(spec.origin, encoding="utf-8") as fh:  # type: ignore[union-attr, arg-type]
            src = fh.read()
    except Exception:
        return "module-globals"
    return "decorator" if "def use_kernel_func_from_hub_with_fallback" in src else "module-globals"


_DECORATOR = re.compile(r"use_kernel_func_from_hub_with_fallback\(\s*[\"']([\w.]+)[\"']\s*,\s*[\"']([\w.]+)[\"']")


def _wrapper_state(obj: Any) -> dict[str, Any] | None:
    """The closure of a `use_kernel_func_from_hub_with_fallback` wrapper, or None.

    5.17+ keeps `func_name`/`package` in the closure; 5.15-5.16 keep only `implementation`, so the
    registered name is read from the decorator line in the source of the wrapped torch function.
    """
    seen = 0
    while obj is not None and seen < 4:
        try:
            nl = dict(inspect.getclosurevars(obj).nonlocals)
        except (TypeError, ValueError):
            return None
        if "implementation" in nl:
            torch_fn = nl.get("torch_function") or getattr(obj, "__wrapped__", None)
            nl.setdefault("torch_function", torch_fn)
            if "func_name" not in nl:
                try:
                    src = inspect.getsource(torch_fn) if torch_fn is not None else ""
                except (OSError, TypeError):
                    src = ""
                m = _DECORATOR.search(src)
                if not m:
                    return None
                nl["func_name"], nl["package"] = m.group(1), m.group(2)
            return nl
        obj = nl.get("wrapped") or nl.get("func")  # a decorator stacked on top
        seen += 1
    return None


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
