"""Model types the installed transformers registers beyond matrix/models.toml: their needs, read from the
modeling module transformers maps them to, and `resolve`, core/models.py's resolver with that lookup filled in
(core/models.py takes it as an argument, so core never imports an integration)."""

from __future__ import annotations

import functools
from dataclasses import replace
from importlib import metadata

from kernelcheck.core import matrix, models
from kernelcheck.integrations import transformers_submodels, transformers_types


def resolve(query: str, *, m: matrix.Matrix) -> models.ResolvedModel:
    """`core/models.resolve`, knowing every model_type the installed transformers registers; the spec is the
    model type as the installed transformers builds it (matrix/models.toml `earlier`)."""
    resolved = models.resolve(query, installed=functools.partial(installed_spec, m=m), m=m)
    spec = resolved.spec.at(installed_version())
    return resolved if spec is resolved.spec else replace(resolved, spec=spec)


def installed_version() -> str | None:
    """The installed transformers' version (distribution metadata, nothing imported); None without one."""
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def installed_spec(model_type: str, *, m: matrix.Matrix) -> matrix.ModelType | None:
    """A model_type kernelcheck does not list but the installed transformers registers: its modeling module
    is asked which kernels it binds. A sub-config type (qwen3_5_text, glm5_next_vision, inkling_text) lives
    in its parent's module, so it gets the parent's needs."""
    known = transformers_types.known_model_types() or {}
    if model_type not in known:
        return None
    module = known[model_type]
    parent = next((s.at(installed_version()) for s in m.model_types.values() if s.module == module), None)
    if parent is not None and tower_of(model_type, m=m) is None:
        return matrix.ModelType(name=model_type, family=parent.family, module=module,
                                    functions=parent.functions, layer=parent.layer, since=parent.since)
    # no parent, or a vision or audio tower of one (qwen3_5_vision): its model builds none of the parent's layers
    return matrix.ModelType(name=model_type, family="unknown", module=module, functions=())


def tower_of(model_type: str, *, m: matrix.Matrix) -> tuple[str, str] | None:
    """(parent model_type, model class) when transformers' model for sub-config `model_type` holds none of the
    parent's fast-kernel layers (a vision or audio tower); None for a text model, an unknown type, or a source
    kernelcheck cannot follow (then the parent's needs are kept: listing a function is safe, dropping one is not)."""
    module = (transformers_types.known_model_types() or {}).get(model_type)
    parent = next((s.at(installed_version()) for s in m.model_types.values() if s.module == module), None)
    if module is None or parent is None or model_type in m.model_types:
        return None
    functions = set(parent.functions)
    for fn in parent.functions:
        info = m.functions.get(fn)
        if info is not None and info.torch_fallback:
            functions.add(info.torch_fallback.split(" ")[0])
    layers = {parent.layer} if parent.layer else set()
    builds, cls = _builds_any(model_type, module, frozenset(layers), frozenset(functions))
    return (parent.name, cls or "?") if builds is False else None


@functools.cache
def _builds_any(model_type: str, module: str, layers: frozenset[str],
                functions: frozenset[str]) -> tuple[bool | None, str | None]:
    """transformers_submodels.builds_any, read once per model type (it follows transformers' source)."""
    return transformers_submodels.builds_any(model_type, module, set(layers), set(functions))
