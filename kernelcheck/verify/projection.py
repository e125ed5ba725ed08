"""Project a measured step of the shortened model to the real layer counts (pure arithmetic).

From one path's worker result (step_worker.py):
- the per-layer cost of each layer type: on a GPU, its forward and backward ranges' share of the GPU
  timeline (trace/gpushare.py): the GPU time of the kernels they launched (joined through the launches'
  correlation ids) plus the idle gaps the GPU spent waiting for those launches. The kernel time is
  taken as measured (the profiler does not slow kernels); the idle part is scaled from the profiled
  step to the unprofiled median step (the profiler slows the CPU, so it widens the gaps). A layer's CPU
  time is never its cost: on a deep queue it holds waits for other layers' kernels. Without a GPU the
  cost is the ranges' CPU time, scaled by unprofiled / profiled step time;
- its spread: the same cost in each profiled step (min and max);
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


def _scales(r: dict[str, Any], steps: int) -> tuple[float, float, bool]:
    """(scale of CPU-time costs, scale of GPU idle gaps, costs are GPU timeline shares)."""
    bd = r.get("breakdown") or {}
    prof_ms = float(r["trace"]["profiled_step_ms"] or 0.0)
    step_ms = float(r["step_ms"])
    cpu_scale = step_ms / prof_ms if prof_ms > 0 else 1.0
    gpu = bd.get("gpu")
    if not gpu:
        return cpu_scale, cpu_scale, False
    busy, idle = float(gpu["busy_ms"]) / steps, float(gpu["idle_ms"]) / steps
    # the profiler only adds CPU time: the unprofiled step's gaps are at most the profiled ones
    idle_scale = min(1.0, max(0.0, step_ms - busy) / idle) if idle > 0 else 1.0
    return cpu_scale, idle_scale, True


def per_layer_costs(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{layer type: {layer_ms, optimizer_ms, total_ms, spread_ms [min, max]}} in unprofiled step time."""
    bd = r.get("breakdown") or {}
    steps = max(1, int(bd.get("profiled_steps") or r["trace"]["profiled_steps"] or 1))
    cpu_scale, idle_scale, on_gpu = _scales(r, steps)
    opt = (bd.get("phases") or {}).get("optimizer", {})
    opt_gpu = float(opt.get("gpu_ms") or 0.0)
    opt_ms = opt_gpu / steps if opt_gpu > 0 else float(opt.get("ms", 0.0)) / steps * cpu_scale
    total_params = float(r["parameters"]) or 1.0
    out: dict[str, dict[str, Any]] = {}
    for typ, e in (bd.get("layer_types") or {}).items():
        if typ.startswith("_") or not e.get("layers"):
            continue
        raw = e["forward"]["cost_ms"] + e["backward"]["cost_ms"]
        if on_gpu:
            idle = e["forward"].get("idle_ms", 0.0) + e["backward"].get("idle_ms", 0.0)
            cost = raw - idle + idle * idle_scale
        else:
            cost = raw * cpu_scale
        layer_ms = cost / (steps * e["layers"])
        ratio = cost / raw if raw > 0 else 1.0
        per_step = [v * ratio for v in e.get("per_step_ms") or [layer_ms]]
        share = opt_ms * float(r["parameters_per_layer"].get(typ, 0.0)) / total_params
        out[typ] = {"layer_ms": round(layer_ms, 3), "optimizer_ms": round(share, 3),
                    "total_ms": round(layer_ms + share, 3),
                    # min/max over the profiled steps; the mean lies inside (rounding of the per-step values)
                    "spread_ms": [round(min(*per_step, layer_ms) + share, 3),
                                  round(max(*per_step, layer_ms) + share, 3)]}
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
        return {"error": f"no measured layer of type {', '.join(missing)} (use --layers to include one of each type)",
                "missing_layer_types": missing}
    measured = float(r["step_ms"])
    layers_ms = sum(built[t] * costs[t]["total_ms"] for t in built if t in costs)
    rest = measured - layers_ms
    projected = rest + sum(full[t] * costs[t]["total_ms"] for t in full)
    extra = {t: full[t] - built.get(t, 0) for t in full}
    # the spread over the profiled steps, carried by the layers the projection adds
    span = [round(projected + sum(n * (costs[t]["spread_ms"][k] - costs[t]["total_ms"]) for t, n in extra.items()), 3)
            for k in (0, 1)]
    return {"measured_step_ms": measured, "built_layers": built, "full_layers": full,
            "per_layer": costs, "rest_ms": round(rest, 3), "projected_step_ms": round(projected, 3),
            "projected_spread_ms": span,
            "projected_tokens_per_s": round(int(r["tokens"]) / projected * 1000, 1) if projected > 0 else None}


def compare(fast: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Both paths' projections and the projected speedup."""
    pf, pr = project(fast), project(ref)
    out: dict[str, Any] = {"fast": pf, "reference": pr, "method": __doc__.split("\n\n", 1)[1].strip()}
    if "projected_step_ms" in pf and "projected_step_ms" in pr and pf["projected_step_ms"] > 0:
        out["projected_speedup"] = round(pr["projected_step_ms"] / pf["projected_step_ms"], 2)
    return out
