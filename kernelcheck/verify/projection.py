"""Project a measured step of the shortened model to the real layer counts (pure arithmetic).

From one path's worker result (step_worker.py):
- the per-layer cost of each layer type: the cost of its forward and backward ranges in the profiled
  steps (larger of CPU time and GPU kernel time per range, trace/phases.py), per layer and per step,
  scaled from the profiled step to the unprofiled median step (profiler overhead);
- plus its share of the optimizer step: the optimizer phase's cost times the layer's share of the
  parameters (AdamW's cost grows with the parameters it updates); on a GPU that cost is the phase's
  kernel time (a fused AdamW is a few multi-tensor kernels; the phase's CPU time mostly waits for the
  backward's queued kernels to drain), without kernels its CPU time;
- everything else (embedding, LM head and loss, the optimizer's share for them, the step's overhead) is
  the measured step minus the layers: it does not grow with the layer count.

projected = measured + sum over types of (full count - built count) x per-layer cost.
"""

from __future__ import annotations

from typing import Any


def per_layer_costs(r: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{layer type: {layer_ms, optimizer_ms, total_ms}} in unprofiled step time."""
    bd = r.get("breakdown") or {}
    steps = max(1, int(bd.get("profiled_steps") or r["trace"]["profiled_steps"] or 1))
    prof_ms = float(r["trace"]["profiled_step_ms"] or 0.0)
    scale = float(r["step_ms"]) / prof_ms if prof_ms > 0 else 1.0
    opt = (bd.get("phases") or {}).get("optimizer", {})
    opt_ms = float(opt.get("gpu_ms") or opt.get("ms", 0.0)) / steps * scale
    total_params = float(r["parameters"]) or 1.0
    out: dict[str, dict[str, float]] = {}
    for typ, e in (bd.get("layer_types") or {}).items():
        if typ.startswith("_") or not e.get("layers"):
            continue
        layer_ms = (e["forward"]["cost_ms"] + e["backward"]["cost_ms"]) / (steps * e["layers"]) * scale
        share = opt_ms * float(r["parameters_per_layer"].get(typ, 0.0)) / total_params
        out[typ] = {"layer_ms": round(layer_ms, 3), "optimizer_ms": round(share, 3),
                    "total_ms": round(layer_ms + share, 3)}
    return out


def project(r: dict[str, Any]) -> dict[str, Any]:
    """The projected full-model step of one path, with every term, or {"error": why}."""
    if "step_ms" not in r:
        return {"error": "the path did not run"}
    costs = per_layer_costs(r)
    built: dict[str, int] = {}
    for t in r["layers"]:
        built[t] = built.get(t, 0) + 1
    full = {t: int(n) for t, n in r["full_layer_types"].items()}
    missing = sorted(t for t in full if t not in costs)
    if missing:
        return {"error": f"no measured layer of type {', '.join(missing)} (use --layers to include one of each type)"}
    measured = float(r["step_ms"])
    layers_ms = sum(built[t] * costs[t]["total_ms"] for t in built if t in costs)
    rest = measured - layers_ms
    projected = rest + sum(full[t] * costs[t]["total_ms"] for t in full)
    return {"measured_step_ms": measured, "built_layers": built, "full_layers": full,
            "per_layer": costs, "rest_ms": round(rest, 3), "projected_step_ms": round(projected, 3),
            "projected_tokens_per_s": round(int(r["tokens"]) / projected * 1000, 1) if projected > 0 else None}


def compare(fast: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Both paths' projections and the projected speedup."""
    pf, pr = project(fast), project(ref)
    out: dict[str, Any] = {"fast": pf, "reference": pr, "method": __doc__.split("\n\n", 1)[1].strip()}
    if "projected_step_ms" in pf and "projected_step_ms" in pr and pf["projected_step_ms"] > 0:
        out["projected_speedup"] = round(pr["projected_step_ms"] / pf["projected_step_ms"], 2)
    return out
