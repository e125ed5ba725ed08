"""A step budget from a trace file: the analysis' single pass with the budget's collector, then the table.

`trace_budget` serves `kernelcheck trace FILE --budget [--model M --tokens N]` and `verify --step --budget` (which
passes the model work it built the step from)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kernelcheck.budget import build, floors
from kernelcheck.budget.collect import BudgetCollector
from kernelcheck.budget.table import Classifier, load
from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.trace.results import TraceAnalysis


def device_of(metadata: Mapping[str, Any]) -> str | None:
    """The GPU's name the trace records (its deviceProperties, kept by the analysis as `gpus`)."""
    gpus = metadata.get("gpus")
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) and isinstance(gpus[0].get("name"), str):
        return str(gpus[0]["name"])
    return None


def model_work(query: str, fields: dict[str, Any], tokens: int, checkpointing: bool, an: TraceAnalysis | None, *,
               layers: Counter[str] | None = None, projected_step_ms: float | None = None,
               parameters: int | None = None) -> build.ModelWork:
    """The model's shape from its text config (`fields`); the layers that ran from the trace's layer ranges (else
    `layers`, else the whole model); the full model's step projected from the trace's per-layer costs when not
    given."""
    if tokens < 1:
        raise BadInput(f"--tokens must be at least 1, not {tokens}.")
    shape = floors.shape_of(fields)
    types = (an.breakdown.get("layer_types") if an is not None else None) or {}
    seen = Counter({t: int(e["layers"]) for t, e in types.items() if not t.startswith("_") and e.get("layers")})
    ran = layers or seen or floors.full_layers(shape)
    if projected_step_ms is None and an is not None and seen:
        projected_step_ms = _projected(an, shape, seen)
    return build.ModelWork(query, shape, Counter({floors.LINEAR if t == floors.LINEAR else t: n
                                                  for t, n in ran.items()}),
                           tokens, checkpointing, projected_step_ms=projected_step_ms, parameters=parameters)


def _projected(an: TraceAnalysis, shape: floors.Shape, seen: Counter[str]) -> float | None:
    """measured step + (full - built layers) x the per-layer GPU cost of each type (its ranges' timeline share)."""
    steps = [s for s in an.steps if s.kernels]
    if not steps:
        return None
    types = an.breakdown.get("layer_types") or {}
    n_steps = max(1, int(an.breakdown.get("profiled_steps") or len(steps)))
    step_ms = sum(s.wall_us for s in steps) / len(steps) / 1e3
    full = floors.full_layers(shape)
    extra = 0.0
    for t, n in full.items():
        e = types.get(t)
        if not e or not seen.get(t):
            return None  # a layer type the trace did not measure
        per = (e["forward"]["cost_ms"] + e["backward"]["cost_ms"]) / (n_steps * seen[t])
        extra += (n - seen[t]) * per
    return round(step_ms + extra, 3)


def collector(m: matrix.Matrix) -> BudgetCollector:
    return BudgetCollector(Classifier(load(m)))


def trace_budget(path: str | os.PathLike[str], *, m: matrix.Matrix,
                 progress: Callable[[int, int], None] | None = None,
                 work: Callable[[TraceAnalysis], build.ModelWork | None] | None = None,
                 ) -> tuple[TraceAnalysis, dict[str, Any]]:
    """Analyse the trace once, with the budget's collector; (the analysis, the budget). `work`: the model work the
    floors are counted for, made from the analysis (its layer ranges); None: measured time only."""
    from kernelcheck.trace.analysis import analyze_file

    col = collector(m)
    an = analyze_file(path, progress, m=m, budget=col)
    mw = work(an) if work is not None else None
    return an, build.budget(col.classifier.table, list(an.budget), mw, device_of(an.metadata), str(path))
