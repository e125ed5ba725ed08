"""Every Hub-decorated layer and function a model's load hands to `kernelize`, read from transformers' source
without importing it.

`from_pretrained` kernelizes the whole module tree it built: the classes of the modeling file the model reaches
from its class (AutoModelForCausalLM's, else AutoModel's), the classes it imports from other transformers modules,
and the activation modules `ACT2FN[config.hidden_act]` (or `get_activation`) instantiates from
`transformers/activations.py` (GeLU, SiLU, NewGELU, ... carry `use_kernel_forward_from_hub` there, not in the
modeling file). Which activation a config selects is read from the config class's field default (`hidden_act: str
= "silu"`): the config class a layer's `__init__` annotates, else the model type's own, else every config class of
the configuration module that declares the field. A vision tower (qwen3_5_vision) reaches only its own classes: no
text-model layer is listed for it.

Anything the reader cannot follow returns None, and the caller keeps its whole-file scan.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernelcheck.core.status import Mode
from kernelcheck.integrations.transformers import transformers_dir
from kernelcheck.integrations.transformers_types import config_class, literal_pairs

logger = logging.getLogger(__name__)

_ROOT_MAPPINGS = ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_MAPPING_NAMES")
_LAYER = re.compile(r"use_kernel_forward_from_hub$")
_FUNC = re.compile(r"use_kernel_func_from_hub(_with_fallback)?$")


@dataclass(frozen=True)
class LoadName:
    """One name `kernelize` meets in the model's load: a layer (`use_kernel_forward_from_hub`) or a function
    (`use_kernel_func_from_hub[_with_fallback]`), and where it comes from (`modeling_gpt2.GPT2MLP:
    ACT2FN[config.activation_function='gelu_new'] -> activations.NewGELUActivation`)."""

    name: str
    kind: str  # layer | function
    where: str


@dataclass
class _Module:
    dotted: str  # transformers.models.gpt2.modeling_gpt2
    classes: dict[str, ast.ClassDef]
    functions: dict[str, ast.FunctionDef]
    imports: dict[str, tuple[str, str]]  # local name -> (dotted module, name there)
    hub: dict[str, tuple[str, str]]  # class/function name -> (hub name, layer|function)


def _decorator_hub(node: ast.ClassDef | ast.FunctionDef) -> tuple[str, str] | None:
    for d in node.decorator_list:
        if not (isinstance(d, ast.Call) and d.args and isinstance(d.args[0], ast.Constant)
                and isinstance(d.args[0].value, str)):
            continue
        fname = d.func.id if isinstance(d.func, ast.Name) else d.func.attr if isinstance(d.func, ast.Attribute) \
            else ""
        if _LAYER.search(fname):
            return d.args[0].value, "layer"
        if _FUNC.search(fname):
            return d.args[0].value, "function"
    return None


def _resolve_relative(dotted: str, level: int, module: str | None) -> str:
    parts = dotted.split(".")[:-level] if level else []
    return ".".join([*parts, *(module.split(".") if module else [])])


def _index(dotted: str, tree: ast.Module) -> _Module:
    got = _Module(dotted, {}, {}, {}, {})
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            src = _resolve_relative(dotted, node.level, node.module)
            for a in node.names:
                got.imports[a.asname or a.name] = (src, a.name)
            continue
        if isinstance(node, ast.ClassDef):
            got.classes[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            got.functions[node.name] = node
        else:
            continue
        hub = _decorator_hub(node)
        if hub:
            got.hub[node.name] = hub
    return got


class _Reader:
    def __init__(self, tdir: Path) -> None:
        self.tdir = tdir
        self.cache: dict[str, _Module | None] = {}

    def module(self, dotted: str) -> _Module | None:
        if dotted not in self.cache:
            rel = dotted.split(".")[1:]
            path = self.tdir.joinpath(*rel).with_suffix(".py") if rel else self.tdir / "__init__.py"
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError) as exc:
                logger.info("cannot read %s: %s", path, exc)
                self.cache[dotted] = None
            else:
                self.cache[dotted] = _index(dotted, tree)
        return self.cache[dotted]

    def find(self, mod: _Module, name: str) -> tuple[_Module, str] | None:
        """Where `name` (used in `mod`) is defined: a class or function of a transformers module."""
        if name in mod.classes or name in mod.functions:
            return mod, name
        imp = mod.imports.get(name)
        if imp and (imp[0].startswith("transformers.models.") or imp[0] == "transformers.activations"):
            other = self.module(imp[0])
            if other is not None and (imp[1] in other.classes or imp[1] in other.functions):
                return other, imp[1]
        return None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _followed(node: ast.ClassDef | ast.FunctionDef) -> list[tuple[str, bool]]:
    """(name, follow it whether class or function) for what an instance of `node` builds or calls: a class follows
    its bases, decorators and what `__init__` names (any kind), and the functions its other methods call (a class
    named there, as in `_init_weights`' isinstance checks, is not built); a function follows all it names."""
    if isinstance(node, ast.FunctionDef):
        return [(n, True) for n in sorted(_names_in(node))]
    out = [(n, True) for b in (*node.bases, *node.decorator_list) for n in sorted(_names_in(b))]
    for fn in node.body:
        if isinstance(fn, ast.FunctionDef):
            out += [(n, fn.name == "__init__") for n in sorted(_names_in(fn))]
    return out


def _init_annotation(cls: ast.ClassDef) -> str | None:
    """The config class `__init__` annotates its `config` parameter with (or the class body's `config: X`)."""
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            for a in fn.args.args:
                if a.arg == "config" and isinstance(a.annotation, ast.Name):
                    return a.annotation.id
    return None


def _activation_keys(node: ast.AST) -> list[tuple[str | None, str | None]]:
    """(config field, literal key) of every `ACT2FN[...]` / `get_activation(...)` in `node`."""
    out: list[tuple[str | None, str | None]] = []
    for n in ast.walk(node):
        expr: ast.expr | None = None
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "ACT2FN":
            expr = n.slice
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "get_activation" and n.args:
            expr = n.args[0]
        if expr is None:
            continue
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            out.append((None, expr.value))
        elif isinstance(expr, ast.Attribute) and _is_config(expr.value):
            out.append((expr.attr, None))
    return out


def _is_config(node: ast.expr) -> bool:
    """`config`, `self.config`, `config.text_config` ...: an expression that reads from a config object."""
    if isinstance(node, ast.Name):
        return node.id == "config"
    if isinstance(node, ast.Attribute):
        return node.attr.endswith("config") or _is_config(node.value)
    return False


def _config_fields(tdir: Path, module: str) -> dict[str, dict[str, str]]:
    """{config class: {field: default string}} of `configuration_<module>.py` (class-body `field: str = "x"`)."""
    path = tdir / "models" / module / f"configuration_{module}.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    return {node.name: _class_fields(node) for node in tree.body if isinstance(node, ast.ClassDef)}


def _class_fields(node: ast.ClassDef) -> dict[str, str]:
    """{field: default string} of one config class: class-body annotations, else `__init__` defaults (older)."""
    fields: dict[str, str] = {}
    for st in node.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) \
                and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            fields[st.target.id] = st.value.value
    for fn in node.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            pos = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
            pairs = [*zip(pos, fn.args.defaults, strict=False), *zip(fn.args.kwonlyargs, fn.args.kw_defaults,
                                                                      strict=False)]
            for a, d in pairs:
                if isinstance(d, ast.Constant) and isinstance(d.value, str):
                    fields.setdefault(a.arg, d.value)
    return fields


def _act2cls(reader: _Reader) -> dict[str, str]:
    """{ACT2FN key: class name} from transformers/activations.py's ACT2CLS literal."""
    mod = reader.module("transformers.activations")
    if mod is None:
        return {}
    path = reader.tdir / "activations.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ACT2CLS" for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            out: dict[str, str] = {}
            for k, v in zip(node.value.keys, node.value.values, strict=False):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    continue
                target = v.elts[0] if isinstance(v, ast.Tuple) and v.elts else v
                if isinstance(target, ast.Name):
                    out[k.value] = target.id
                elif isinstance(target, ast.Attribute):
                    out[k.value] = target.attr
            return out
    return {}


def root_class(model_type: str) -> str | None:
    """The class a job's `from_pretrained` builds for `model_type`: AutoModelForCausalLM's, else AutoModel's
    (a vision or audio tower has only the latter); read from modeling_auto.py."""
    tdir = transformers_dir()
    if tdir is None:
        return None
    try:
        tree = ast.parse((tdir / "models" / "auto" / "modeling_auto.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    found: dict[str, dict[str, str]] = {k: {} for k in _ROOT_MAPPINGS}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in found:
            found[node.targets[0].id].update(literal_pairs(node.value))
    for name in _ROOT_MAPPINGS:
        if model_type in found[name]:
            return found[name][model_type]
    return None


def load_names(model_type: str, module: str) -> tuple[LoadName, ...] | None:
    """Every Hub name `kernelize` meets when `from_pretrained` loads a `model_type` model whose modeling module is
    `modeling_<module>`; None when the source cannot be followed (no Auto class, an unreadable module)."""
    tdir = transformers_dir()
    if tdir is None:
        return None
    reader = _Reader(tdir)
    start = reader.module(f"transformers.models.{module}.modeling_{module}")
    if start is None:
        return None
    cls_name = root_class(model_type)
    if cls_name is None or cls_name not in start.classes:
        from kernelcheck.integrations.transformers_submodels import class_for_config

        cls_name = class_for_config(start.classes, config_class(model_type))
    if cls_name is None or cls_name not in start.classes:
        return None
    return _walk(reader, start, cls_name, config_class(model_type), _config_fields(tdir, module))


def _walk(reader: _Reader, start: _Module, cls_name: str, root_cfg: str | None,
          fields: dict[str, dict[str, str]]) -> tuple[LoadName, ...]:
    """The Hub names met from `cls_name` down, each with where; `root_cfg`: the config the root class reads."""
    act2cls = _act2cls(reader)
    acts = reader.module("transformers.activations")
    out: dict[str, LoadName] = {}
    seen: set[tuple[str, str, str | None]] = set()
    todo: list[tuple[_Module, str, str | None]] = [(start, cls_name, root_cfg)]
    while todo:
        mod, name, ctx = todo.pop()
        if (mod.dotted, name, ctx) in seen:
            continue
        seen.add((mod.dotted, name, ctx))
        here = f"{mod.dotted.rsplit('.', 1)[-1]}.{name}"
        if name in mod.hub:
            hub_name, kind = mod.hub[name]
            out.setdefault(hub_name, LoadName(hub_name, kind, here))
        node: ast.ClassDef | ast.FunctionDef = mod.classes[name] if name in mod.classes else mod.functions[name]
        cfg = _init_annotation(node) if isinstance(node, ast.ClassDef) else None
        if cfg in fields and fields[cfg]:
            ctx = cfg  # the config this class and what it builds read (a composite config declares no fields)
        for used, any_kind in _followed(node):
            found = reader.find(mod, used)
            if found is not None and found[1] != name and (any_kind or found[1] in found[0].functions):
                todo.append((*found, ctx))
        for ln in _activations(node, here, act2cls, acts, _field_values(fields, cfg, ctx)):
            out.setdefault(ln.name, ln)
    return tuple(out.values())


def _field_values(fields: dict[str, dict[str, str]], cfg: str | None,
                  root: str | None) -> Callable[[str], list[str]]:
    """The values a config field can hold for a layer: its annotated config class's default, else that of the
    config the classes above it read (the model type's at the root), else every config class of the module that
    declares it."""
    def values(field: str) -> list[str]:
        for c in (cfg, root):
            if c and field in fields.get(c, {}):
                return [fields[c][field]]
        return sorted({f[field] for f in fields.values() if field in f})

    return values


def _activations(node: ast.AST, here: str, act2cls: dict[str, str], acts: _Module | None,
                 values: Callable[[str], list[str]]) -> list[LoadName]:
    """The Hub-decorated activation modules `node` instantiates through ACT2FN / get_activation."""
    out: list[LoadName] = []
    if acts is None:
        return out
    for field, key in _activation_keys(node):
        for k in [key] if key else values(field or ""):
            cls = act2cls.get(k)
            if cls in acts.hub:
                via = f"ACT2FN[config.{field}={k!r}]" if field else f"ACT2FN[{k!r}]"
                hub_name, kind = acts.hub[cls]
                out.append(LoadName(hub_name, kind, f"{here}: {via} -> activations.{cls}"))
    return out


def hub_names(model_type: str | None, modeling: str | None, functions: tuple[str, ...] = ()) -> dict[str, LoadName]:
    """{name: LoadName} of what the load kernelizes: `load_names` where the source can be followed, else every
    name the modeling file registers (the older whole-file scan); then `functions` (the model's fast functions)."""
    from kernelcheck.integrations.transformers_hub import model_hub_names

    out: dict[str, LoadName] = {}
    short = modeling.rsplit(".", 1)[-1].removeprefix("modeling_") if modeling else None
    got = load_names(model_type, short) if model_type and short else None
    if got is not None:
        out = {n.name: n for n in got}
    elif modeling:
        out = {n: LoadName(n, kind, modeling.rsplit(".", 1)[-1]) for n, kind in model_hub_names(modeling).items()}
    for f in functions:
        out.setdefault(f, LoadName(f, "function", "the model's fast function"))
    return out


# The phases in which a job's load kernelizes: `from_pretrained` calls `model.eval()` and then `set_use_kernels`,
# so the load kernelizes for INFERENCE whatever the job does; a training job's `model.train()` kernelizes again for
# TRAINING. Both must resolve offline.
PHASE_LOAD = "load"
PHASE_TRAIN = "train"


def load_phases(mode: str, eval_at_load: bool) -> tuple[tuple[str, str], ...]:
    """((phase, the kernelcheck mode kernelize resolves in), ...) for a job of `mode`. `eval_at_load`: the installed
    from_pretrained puts the model in eval mode before it kernelizes (read by transformers_hub); without it the
    load kernelizes in the job's own mode."""
    if not eval_at_load:
        return ((PHASE_LOAD, mode),)
    return ((PHASE_LOAD, Mode.INFER),) + (((PHASE_TRAIN, Mode.TRAIN),) if mode == Mode.TRAIN else ())
