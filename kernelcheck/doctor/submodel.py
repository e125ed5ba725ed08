"""A sub-config type whose model is a vision or audio tower (qwen3_5_vision): it shares its parent's modeling
module, so the module's fast-function decorators are read, but the model transformers builds for it holds none of
the layers that call them (integrations/transformers_models.py `tower_of`, read from transformers' source). Those
functions are dropped from the report, and one info finding says why."""

from __future__ import annotations

from dataclasses import replace

from kernelcheck.core import matrix, models
from kernelcheck.core.status import Finding, Severity
from kernelcheck.integrations import transformers, transformers_models


def restrict(model: models.ResolvedModel, result: transformers.BindingResult, findings: list[Finding], *,
             m: matrix.Matrix) -> transformers.BindingResult:
    """`result` without the module's functions the tower never calls (an info finding in `findings` names them)."""
    tower = transformers_models.tower_of(model.model_type, m=m) if model.spec.family == "unknown" else None
    if tower is None:
        return result
    parent, cls = tower
    dropped = [f for f in result.bindings if f not in model.spec.functions]
    findings.append(Finding(
        "sub-model-without-kernels", Severity.INFO,
        f"{model.model_type} is a sub-model of {parent}: transformers builds {cls} for it, which holds none of "
        f"{parent}'s fast-kernel layers, so {', '.join(dropped) or 'none of its fast functions'} never run here. "
        f"The kernels matter for the model that holds the text layers (`--model {parent}`).",
        functions=tuple(dropped)))
    return replace(result, bindings={f: b for f, b in result.bindings.items() if f in model.spec.functions},
                   discovered=())


def dropped(findings: list[Finding]) -> tuple[str, ...]:
    """The module's functions `restrict` dropped for a tower (none for any other model): the Hub section leaves them
    out too, as the model never calls them."""
    return next((f.functions for f in findings if f.id == "sub-model-without-kernels"), ())
