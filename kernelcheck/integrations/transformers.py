"""Which implementation transformers will really call for each fast function.

Two regimes, detected from the installed code rather than from version numbers:
- decorator (>= 5.15): `use_kernel_func_from_hub_with_fallback(name, package)` resolves the
  implementation once, at import of the modeling module; the wrapper's closure holds
  `implementation` and `is_new_implementation` (functools.wraps makes `__module__` lie).
- module-globals (<= 5.14): the modeling module imports the functions at module level and
  stores None when `is_*_available()` says no; layers fall back to `torch_*` functions.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck.core import matrix

logger = logging.getLogger(__name__)


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
    """Read the installed source without importing transformers (its import alone costs seconds, and a
    broken dependency must not change the answer)."""
    tdir = transformers_dir()
    try:
        src = (tdir / "integrations" / "hub_kernels.py").read_text(encoding="utf-8") if tdir else ""
    except OSError:
        return "module-globals"
    return "decorator" if "def use_kernel_func_from_hub_with_fallback" in src else "module-globals"


def transformers_dir() -> Path | None:
    """transformers' package folder, found without executing its __init__."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


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


def _literal_mapping(tree: ast.Module, name: str) -> dict[str, Any]:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                val = ast.literal_eval(value)
            except ValueError:
                return {}
            return val if isinstance(val, dict) else {}
    return {}


# ---------------------------------------------------------------------------------------------------------------
# transformers <= 5.14, Mamba family: kernels resolved in the mixer's __init__ by `lazy_load_kernel`
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LazyLayer:
    """A layer class whose `__init__` binds module globals from `lazy_load_kernel(NAME)` and whose forward takes
    the fast path only when every name of its `all((...))` gate is set (and the weights are on CUDA)."""

    cls: str
    torch_path: str  # the method that runs otherwise: torch_forward | slow_forward
    gate: tuple[str, ...]  # module-level names the fast path needs, as the source spells them
    sources: dict[str, tuple[str, str]]  # name -> (lazy_load_kernel name, attribute path in that module)
    line: int = 0  # the first lazy_load_kernel call (for references)


def _lazy_layer(node: ast.ClassDef) -> LazyLayer | None:
    kernel_of: dict[str, str] = {}
    sources: dict[str, tuple[str, str]] = {}
    gate: tuple[str, ...] = ()
    line = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name) \
                and isinstance(sub.value, ast.Call):
            target, call = sub.targets[0].id, sub.value
            fname = getattr(call.func, "id", getattr(call.func, "attr", ""))
            args = [a.value if isinstance(a, ast.Constant) else getattr(a, "id", None) for a in call.args]
            kw = {k.arg: k.value.value for k in call.keywords if isinstance(k.value, ast.Constant)}
            if fname == "lazy_load_kernel" and args and isinstance(args[0], str):
                kernel_of[target] = args[0]
                line = line or sub.lineno
            elif fname == "getattr" and len(args) >= 2 and args[0] in kernel_of and isinstance(args[1], str):
                sources[target] = (kernel_of[str(args[0])], args[1])
            elif fname == "resolve_internal_import" and args and args[0] in kernel_of:
                path = kw.get("chained_path") or (args[1] if len(args) > 1 else None)
                if isinstance(path, str):
                    sources[target] = (kernel_of[str(args[0])], path)
        if isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "all" and len(sub.args) == 1 \
                and isinstance(sub.args[0], ast.Tuple | ast.List):
            names = tuple(e.id for e in sub.args[0].elts if isinstance(e, ast.Name))
            if names and set(names) <= set(sources):
                gate = names
    methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    torch_path = next((p for p in ("torch_forward", "slow_forward") if p in methods), "")
    if not sources or not torch_path:
        return None
    return LazyLayer(node.name, torch_path, gate or tuple(sources), sources, line)


def lazy_layers(module_name: str) -> list[LazyLayer] | None:
    """The lazily-resolving layers of transformers.models.<module>.modeling_<module>, read from the installed
    source (no import: importing binds nothing, building the model does); None when the module has none."""
    tdir = transformers_dir()
    if tdir is None:
        return None
    try:
        src = (tdir / "models" / module_name / f"modeling_{module_name}.py").read_text(encoding="utf-8")
        if "lazy_load_kernel(" not in src:
            return None
        tree = ast.parse(src)
    except (OSError, SyntaxError, ValueError):
        return None
    found = [lz for n in tree.body if isinstance(n, ast.ClassDef) and (lz := _lazy_layer(n)) is not None]
    return found or None


def lazy_kernel_sources() -> tuple[dict[str, Any], set[str], str]:
    """(_HUB_KERNEL_MAPPING, the `is_<name>_available` functions import_utils defines, hub_kernels.py path) of the
    installed transformers: what `lazy_load_kernel` consults."""
    tdir = transformers_dir()
    if tdir is None:
        return {}, set(), ""
    hub = tdir / "integrations" / "hub_kernels.py"
    try:
        mapping = _literal_mapping(ast.parse(hub.read_text(encoding="utf-8")), "_HUB_KERNEL_MAPPING")
        iu = (tdir / "utils" / "import_utils.py").read_text(encoding="utf-8")
    except (OSError, SyntaxError, ValueError):
        return {}, set(), str(hub)
    return mapping, set(re.findall(r"^def (is_\w+_available)\(", iu, re.M)), str(hub)


def bind_lazy(module_name: str, functions: tuple[str, ...], *, m: matrix.Matrix) -> BindingResult | None:
    """The lazy-kernel regime: one Binding per gate name, bound "torch" until doctor resolves it the way
    lazy_load_kernel does (doctor/run.py `lazy_statuses`), which needs the environment."""
    if detect_regime() == "decorator":
        return None
    got = lazy_layers(module_name)
    if not got:
        return None
    aliases = dict((m.transformers.get("lazy_kernels") or {}).get("aliases", {}))
    dotted = f"transformers.models.{module_name}.modeling_{module_name}"
    out: dict[str, Binding] = {}
    for lz in got:
        for name in lz.gate:
            fn = aliases.get(name, name)
            kernel, attr = lz.sources[name]
            out.setdefault(fn, Binding(
                fn, kernel.replace("-", "_"), "torch", f"{dotted}.{lz.cls}.{lz.torch_path}", "lazy-kernel",
                registered_as=name if name != fn else None,
                extra={"layer": lz.cls, "torch_path": lz.torch_path, "kernel": kernel, "attribute_path": attr,
                       "gate": [aliases.get(g, g) for g in lz.gate], "line": lz.line}))
    return BindingResult("lazy-kernel", dotted, out, discovered=tuple(out))


@dataclass(frozen=True)
class Decorated:
    """One `@use_kernel_func_from_hub_with_fallback(registered, package[, internal_path])` in a modeling source."""

    attribute: str  # the decorated torch function's name in the module
    registered: str
    package: str
    internal_path: str | None


@dataclass(frozen=True)
class StaticRead:
    """What the modeling source declares, read without importing anything (the imports come after)."""

    dotted: str
    decorated: tuple[Decorated, ...]
    submodule_fallback: bool
    own: tuple[str, ...] = ()  # top-level functions the module defines itself, undecorated (torch-only code)


def read_static(module_name: str) -> StaticRead | None:
    """The decorators of transformers.models.<module>.modeling_<module>, read from source (no import). None
    when the source cannot be read this way (module-globals regime, unreadable or unparsable source)."""
    tdir = transformers_dir()
    if tdir is None or detect_regime() != "decorator":
        return None
    dotted = f"transformers.models.{module_name}.modeling_{module_name}"
    try:
        src = (tdir / "models" / module_name / f"modeling_{module_name}.py").read_text(encoding="utf-8")
        hub_src = (tdir / "integrations" / "hub_kernels.py").read_text(encoding="utf-8")
        tree, hub_tree = ast.parse(src), ast.parse(hub_src)
    except (OSError, SyntaxError, ValueError):
        return None
    internal = _literal_mapping(hub_tree, "_KERNELS_INTERNAL_PATH_MAPPINGS")
    decorated: list[Decorated] = []
    own = own_functions(tree)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and getattr(dec.func, "id", getattr(dec.func, "attr", ""))
                    == "use_kernel_func_from_hub_with_fallback"):
                continue
            try:
                args = [ast.literal_eval(a) for a in dec.args]
            except ValueError:
                return None
            registered, package = args[0], args[1]
            decorated.append(Decorated(node.name, registered, package,
                                       internal.get(registered, args[2] if len(args) > 2 else None)))
    return StaticRead(dotted, tuple(decorated), "full_module_path != package" in hub_src, own)


def bindings_from_static(read: StaticRead, functions: tuple[str, ...], resolved: list[str | None], *,
                         m: matrix.Matrix) -> BindingResult:
    """The BindingResult of `read` once each decorator is resolved (`resolved[i]`: the dotted name of what
    transformers takes for read.decorated[i], None when it keeps the torch function)."""
    misnamed = {e["registered"]: e["function"] for e in m.transformers.get("misnamed", [])}
    found: dict[str, Binding] = {}
    for d, impl in zip(read.decorated, resolved, strict=True):
        fname = misnamed.get(d.registered, d.registered)
        found[fname] = Binding(
            function=fname, package=d.package, bound="package" if impl is not None else "torch",
            implementation=impl if impl is not None else f"{read.dotted}.{d.attribute}",
            regime="decorator", registered_as=d.registered if d.registered != fname else None,
            extra={"attribute": d.attribute, "method": "static"},
        )
    out = {}
    for f in dict.fromkeys((*functions, *found)):
        out[f] = found.get(f) or _unbound(f, m, "decorator", f in read.own)
    return BindingResult("decorator", read.dotted, out, discovered=tuple(found))


def _unbound(f: str, m: matrix.Matrix, regime: str, own: bool) -> Binding:
    """A function the module binds no kernel to; `own`: the module defines a plain torch function of that name
    (transformers 5.23's lfm3: "torch only: the hub causal_conv1d kernels serve widths 2-4, LFM3 uses 7")."""
    return Binding(f, m.functions[f].package if f in m.functions else "", "unbound", "-", regime,
                   extra={"defined_in_module": True} if own else {})


def own_functions(tree: ast.Module) -> tuple[str, ...]:
    """The top-level, undecorated functions a module's source defines: its own torch code. A def inside an
    `if is_..._available()` branch is a fallback, not counted."""
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.decorator_list)


def _own_function(mod: Any, dotted: str, name: str) -> bool:
    obj = vars(mod).get(name)
    if not callable(obj) or isinstance(obj, type) or getattr(obj, "__module__", None) != dotted:
        return False
    try:
        return name in own_functions(ast.parse(Path(mod.__file__).read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError, TypeError):
        return False


def resolve_decorated(read: StaticRead, d: Decorated) -> str | None:
    """Resolve one decorator in this process exactly as `use_kernel_func_from_hub_with_fallback` does (imports
    the package): the dotted name of the implementation, None for the torch function."""
    impl = _resolve_like_transformers(d.package, d.registered, d.internal_path, read.submodule_fallback)
    return _dotted(impl) if impl is not None else None


def bind_static(module_name: str, functions: tuple[str, ...], *, m: matrix.Matrix) -> BindingResult | None:
    """The decorator regime without importing transformers: read the decorators from the modeling
    source and resolve each one exactly as `use_kernel_func_from_hub_with_fallback` does
    (import the package, walk the internal path, fall back to the submodule where the installed
    transformers does). None when the source cannot be read this way; callers then use `bind`.
    Tests assert it agrees with `bind` for every transformers installed in them. doctor runs the same
    resolution in a child process (kernelcheck/doctor/imports.py), so that its own process imports no kernel.
    """
    read = read_static(module_name)
    if read is None:
        return None
    return bindings_from_static(read, functions, [resolve_decorated(read, d) for d in read.decorated], m=m)


def _resolve_like_transformers(package: str, func: str, internal_path: str | None, submodule_fallback: bool) -> Any:
    full_func_path = func if internal_path is None else f"{internal_path}.{func}"
    full_module_path = package if internal_path is None else f"{package}.{internal_path}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            root = importlib.import_module(package)
            # transformers' resolve_internal_import: the name at the root first, then the chained path
            obj: Any = getattr(root, func, None)
            if obj is None:
                obj = root
                for part in full_func_path.split("."):
                    obj = getattr(obj, part, None)
                    if obj is None:
                        break
            if obj is None and submodule_fallback and full_module_path != package:
                obj = getattr(importlib.import_module(full_module_path), func, None)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM during the import: the command stops, it is no finding
        raise
    except BaseException:  # noqa: BLE001 - transformers swallows every exception here too
        return None
    return obj


def bind(module_name: str, functions: tuple[str, ...], exact: bool = False, *, m: matrix.Matrix) -> BindingResult:
    """What transformers binds for each function of transformers.models.<module>.modeling_<module>.

    Default: the static reading for the decorator regime (fast: no transformers import); `exact`
    imports the modeling module and reads the real closures (also used for <= 5.14).
    """
    if not exact:
        got = bind_static(module_name, functions, m=m)
        if got is not None:
            return got
    # <= 5.14 Mamba family: importing the module binds nothing, building the layer does; the source says how
    lazy = bind_lazy(module_name, functions, m=m)
    if lazy is not None:
        return lazy
    return bind_exact(module_name, functions, m=m)


def bind_exact(module_name: str, functions: tuple[str, ...], *, m: matrix.Matrix) -> BindingResult:
    """Import transformers.models.<module>.modeling_<module> and read each function's binding."""
    regime = detect_regime()
    dotted = f"transformers.models.{module_name}.modeling_{module_name}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = importlib.import_module(dotted)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM during the import: the command stops, it is no finding
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing import is the finding
        return BindingResult(regime, dotted, {}, module_error=f"{type(exc).__name__}: {exc}")
    if regime == "decorator":
        return _bind_decorated(mod, dotted, functions, m)
    return _bind_globals(mod, dotted, functions, m)


def _bind_decorated(mod: Any, dotted: str, functions: tuple[str, ...], m: matrix.Matrix) -> BindingResult:
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
        out[f] = found.get(f) or _unbound(f, m, "decorator", _own_function(mod, dotted, f))
    return BindingResult("decorator", dotted, out, discovered=tuple(dict.fromkeys(discovered)))


def _bind_globals(mod: Any, dotted: str, functions: tuple[str, ...], m: matrix.Matrix) -> BindingResult:
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
