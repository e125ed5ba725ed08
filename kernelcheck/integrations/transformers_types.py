"""Which model types the installed transformers knows, read from its auto mappings without importing it
(`import transformers.models.auto.configuration_auto` alone costs ~5 s)."""

from __future__ import annotations

import ast
import logging

from kernelcheck.integrations.transformers import transformers_dir

logger = logging.getLogger(__name__)

_MAPPINGS = ("CONFIG_MAPPING_NAMES", "SPECIAL_MODEL_TYPE_TO_MODULE_NAME")


def literal_pairs(node: ast.AST) -> dict[str, str]:
    """{k: v} from `{...}`, `OrderedDict([...])`, `OrderedDict({...})` or `OrderedDict(**{...}, ...)`."""
    if isinstance(node, ast.Call):
        out: dict[str, str] = {}
        for a in (*node.args, *(k.value for k in node.keywords)):
            out.update(literal_pairs(a))
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
            into[node.targets[0].id].update(literal_pairs(node.value))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "update" \
                and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id in _MAPPINGS:
            for a in node.value.args:
                into[node.value.func.value.id].update(literal_pairs(a))


def known_model_types() -> dict[str, str] | None:
    """{model_type: modeling module name} for every config type the installed transformers registers
    (sub-configs such as qwen3_5_text or glm5_next_vision map to their parent's module), or None when
    transformers is absent or its auto mappings cannot be read."""
    found = _mappings()
    if found is None:
        return None
    special = found["SPECIAL_MODEL_TYPE_TO_MODULE_NAME"]
    return {t: special.get(t, t.replace("-", "_")) for t in found["CONFIG_MAPPING_NAMES"]}


def config_class(model_type: str) -> str | None:
    """The config class name the installed transformers registers for `model_type` (InklingAudioConfig)."""
    found = _mappings()
    return None if found is None else found["CONFIG_MAPPING_NAMES"].get(model_type)


def _mappings() -> dict[str, dict[str, str]] | None:
    """transformers' auto mappings (CONFIG_MAPPING_NAMES, SPECIAL_MODEL_TYPE_TO_MODULE_NAME), read statically."""
    tdir = transformers_dir()
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
    return found
