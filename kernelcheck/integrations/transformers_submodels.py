"""Which layers the model of a sub-config type builds, read from transformers' source without importing it.

A sub-config type (qwen3_5_text, qwen3_5_vision, glm5_next_vision, inkling_text) lives in its parent's modeling
module. `AutoModel` builds `MODEL_MAPPING_NAMES[type]` for it (Qwen3_5TextModel, Qwen3_5VisionModel): the text
model holds the parent's fast-kernel layers, a vision or audio tower holds none of them. What a class builds is
read from the `__init__` bodies: the module's classes it calls there (nn.ModuleList([...Layer(config, i)...])),
its bases in the same module, and so on down. Anything the reader cannot follow returns None (unknown), and the
caller keeps the parent's needs: listing a function that may run is safe, dropping one that runs is not.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from kernelcheck.integrations.transformers import transformers_dir
from kernelcheck.integrations.transformers_types import config_class, literal_pairs

logger = logging.getLogger(__name__)

_MODEL_MAPPINGS = ("MODEL_MAPPING_NAMES", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")


def _model_class(tdir: Path, model_type: str) -> str | None:
    """The class AutoModel (else AutoModelForCausalLM) builds for `model_type`, from modeling_auto.py."""
    try:
        tree = ast.parse((tdir / "models" / "auto" / "modeling_auto.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as exc:
        logger.info("cannot read transformers' modeling_auto.py: %s", exc)
        return None
    found: dict[str, dict[str, str]] = {k: {} for k in _MODEL_MAPPINGS}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in found:
            found[node.targets[0].id].update(literal_pairs(node.value))
    for name in _MODEL_MAPPINGS:
        if model_type in found[name]:
            return found[name][model_type]
    return None


def class_for_config(classes: dict[str, ast.ClassDef], config_cls: str | None) -> str | None:
    """The one class of the module whose body declares `config: CONFIG_CLS` (InklingAudioModel for
    InklingAudioConfig, a tower its parent builds with `InklingAudioModel(config.audio_config)`); None when there
    is none or more than one."""
    if not config_cls:
        return None
    found = [name for name, cls in classes.items()
             if any(isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == "config"
                    and isinstance(n.annotation, ast.Name) and n.annotation.id == config_cls for n in cls.body)]
    return found[0] if len(found) == 1 else None


_class_for_config = class_for_config  # the older name


def _init_calls(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """(names called in __init__, identifiers used in every method) of one class."""
    called: set[str] = set()
    used: set[str] = set()
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            if fn.name == "__init__" and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
    return called, used


def _reach(classes: dict[str, ast.ClassDef], start: str) -> set[str]:
    """The module's classes an instance of `start` builds (itself, its local bases, what their __init__ calls)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        cls = classes[name]
        called, _ = _init_calls(cls)
        bases = [b.id for b in cls.bases if isinstance(b, ast.Name)]
        todo += [n for n in (*called, *bases) if n in classes]
    return seen


def builds_any(model_type: str, module: str, layers: set[str], functions: set[str]) -> tuple[bool | None, str | None]:
    """(does the model of `model_type` build one of `layers` or a layer whose methods use one of `functions`,
    the model's class name).

    `layers`: the parent's kernel layer class; `functions`: its fast functions and their torch references (a
    class name in `_init_weights`' isinstance checks is no use, so layers count only when built). (None, class)
    when the source cannot be followed (no mapping entry, the class defined elsewhere, an unreadable module)."""
    tdir = transformers_dir()
    if tdir is None:
        return None, None
    cls_name = _model_class(tdir, model_type)
    path = tdir / "models" / module / f"modeling_{module}.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as exc:
        logger.info("cannot read %s: %s", path, exc)
        return None, cls_name
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if cls_name is None:  # no Auto mapping (inkling_audio): the one model class declared for its config class
        cls_name = class_for_config(classes, config_class(model_type))
    if cls_name is None or cls_name not in classes:
        return None, cls_name
    reached = _reach(classes, cls_name)
    if reached & layers:
        return True, cls_name
    used: set[str] = set()
    for n in reached:
        used |= _init_calls(classes[n])[1]
    return bool(used & functions), cls_name
