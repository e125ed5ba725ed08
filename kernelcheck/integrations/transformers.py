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

from kernelcheck.core import matrix as matrix_mod

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
    tdir = _transformers_dir()
    try:
        src = (tdir / "integrations" / "hub_kernels.py").read_text(encoding="utf-8") if tdir else ""
    except OSError:
        return "module-globals"
    return "decorator" if "def use_kernel_func_from_hub_with_fallback" in src else "module-globals"


def _transformers_dir() -> Path | None:
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


def _literal_mapping(tree: ast.Module, name: str) -> dict[str, str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                val = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return val if isinstance(val, dict) else {}
    return {}


def bind_static(module_name: str, functions: tuple[str, ...]) -> BindingResult | None:
    """The decorator regime without importing transformers: read the decorators from the modeling
    source and resolve each one exactly as `use_kernel_func_from_hub_with_fallback` does
    (import the package, walk the internal path, fall back to the submodule where the installed
    transformers does). None when the source cannot be read this way; callers then use `bind`.
    Tests assert it agrees with `bind` for every transformers installed in them.
    """
    tdir = _transformers_dir()
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
    submodule_fallback = "full_module_path != package" in hub_src
    m = matrix_mod.load()
    misnamed = {e["registered"]: e["function"] for e in m.transformers.get("misnamed", [])}
    found: dict[str, Binding] = {}
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
            ipath = internal.get(registered, args[2] if len(args) > 2 else None)
            impl = _resolve_like_transformers(package, registered, ipath, submodule_fallback)
            fname = misnamed.get(registered, registered)
            found[fname] = Binding(
                function=fname, package=package, bound="package" if impl is not None else "torch",
                implementation=_dotted(impl) if impl is not None else f"{dotted}.{node.name}",
                regime="decorator", registered_as=registered if registered != fname else None,
                extra={"attribute": node.name, "method": "static"},
            )
    out = {}
    for f in dict.fromkeys((*functions, *found)):
        out[f] = found.get(f) or Binding(f, m.functions[f].package if f in m.functions else "", "unbound", "-",
                                         "decorator")
    return BindingResult("decorator", dotted, out, discovered=tuple(found))


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


def bind(module_name: str, functions: tuple[str, ...], exact: bool = False) -> BindingResult:
    """What transformers binds for each function of transformers.models.<module>.modeling_<module>.

    Default: the static reading for the decorator regime (fast: no transformers import); `exact`
    imports the modeling module and reads the real closures (also used for <= 5.14).
    """
    if not exact:
        got = bind_static(module_name, functions)
        if got is not None:
            return got
    return bind_exact(module_name, functions)


def bind_exact(module_name: str, functions: tuple[str, ...]) -> BindingResult:
    """Import transformers.models.<module>.modeling_<module> and read each function's binding."""
    m = matrix_mod.load()
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


# ---------------------------------------------------------------------------------------------------------------
# Which model types the installed transformers knows (read from its auto mappings, without importing it:
# `import transformers.models.auto.configuration_auto` alone costs ~5 s)
# ---------------------------------------------------------------------------------------------------------------

_MAPPINGS = ("CONFIG_MAPPING_NAMES", "SPECIAL_MODEL_TYPE_TO_MODULE_NAME")


def _literal_pairs(node: ast.AST) -> dict[str, str]:
    """{k: v} from `{...}`, `OrderedDict([...])`, `OrderedDict({...})` or `OrderedDict(**{...}, ...)`."""
    if isinstance(node, ast.Call):
        out: dict[str, str] = {}
        for a in (*node.args, *(k.value for k in node.keywords)):
            out.update(_literal_pairs(a))
        return out
    try:
        val = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return {}
    if isinstance(val, dict):
        return {str(k): str(v) for k, v in val.items()}
    if isinstance(val, list | tuple):
        return {str(p[0]): str(p[1]) for p in val if isinstance(p, list | tuple) and len(p) == 2}
    return {}


def _collect(tree: ast.Module, into: dict[str, dict[str, str]]) -> None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in _MAPPINGS:
            into[node.targets[0].id].update(_literal_pairs(node.value))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "update" \
                and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id in _MAPPINGS:
            for a in node.value.args:
                into[node.value.func.value.id].update(_literal_pairs(a))


def known_model_types() -> dict[str, str] | None:
    """{model_type: modeling module name} for every config type the installed transformers registers
    (sub-configs such as qwen3_5_text or glm5_next_vision map to their parent's module), or None when
    transformers is absent or its auto mappings cannot be read."""
    tdir = _transformers_dir()
    if tdir is None:
        return None
    found: dict[str, dict[str, str]] = {k: {} for k in _MAPPINGS}
    for name in ("auto_mappings.py", "configuration_auto.py"):
        path = tdir / "models" / "auto" / name
        try:
            _collect(ast.parse(path.read_text(encoding="utf-8")), found)
        except FileNotFoundError:
            continue
        except (OSError, SyntaxError, ValueError) as exc:
            logger.warning("could not read %s: %s", path, exc)
    if not found["CONFIG_MAPPING_NAMES"]:
        logger.warning("no CONFIG_MAPPING_NAMES found in %s/models/auto", tdir)
        return None
    special = found["SPECIAL_MODEL_TYPE_TO_MODULE_NAME"]
    return {t: special.get(t, t.replace("-", "_")) for t in found["CONFIG_MAPPING_NAMES"]}
