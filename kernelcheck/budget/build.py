"""A step budget from a profiled step: per op class its measured GPU time and share, its floor, the gap, the
causes that apply and their fixes; the MFU of the step and of the projected full model; the step time at the
floors. A value of plain JSON types (`schema` kernelcheck.budget/1) that the text, the picture and the reports read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from kernelcheck.budget import floors as floors_mod
from kernelcheck.budget.collect import StepRaw
from kernelcheck.budget.table import OpTable, Peak

SCHEMA = "kernelcheck.budget/1"
TOP_UNCLASSIFIED = 20
COVERAGE_TARGET = 0.98  # a budget whose classes cover less of the step says so (a finding, not a silence)


@dataclass(frozen=True)
class ModelWork:
    """What the floors are computed for: the model's shape, the layers that ran, the tokens of a step."""

    query: str
    shape: floors_mod.Shape
    layers: Counter[str]  # the layers in the profiled step (type -> count)
    tokens: int
    checkpointing: bool
    train: bool = True
    projected_step_ms: float | None = None  # the full model's step time, projected from a measured one
    parameters: int | None = None  # the profiled model's parameters as counted at run time


def _r(v: float, nd: int = 3) -> float:
    return round(v, nd)


def _peak_json(p: Peak | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"gpu": p.gpu, "bf16_tflops": p.bf16_tflops, "hbm_tb_s": p.hbm_tb_s, "reference": p.reference}


def floors(table: OpTable, mw: ModelWork | None, peak: Peak | None) -> dict[str, dict[str, Any]]:
    """class -> {floor_ms, by, flops, bytes, formula} (floor_ms None where it cannot be computed)."""
    out: dict[str, dict[str, Any]] = {}
    work = (floors_mod.work(mw.shape, mw.layers, mw.tokens, mw.checkpointing, mw.train, mw.parameters)
            if mw is not None else {})
    for c in table.classes:
        if c.floor == "zero":
            out[c.id] = {"floor_ms": 0.0, "by": "zero", "flops": 0.0, "bytes": 0.0,
                         "formula": "an ideal step spends nothing here"}
            continue
        w = work.get(c.id)
        if c.floor == "none" or w is None or peak is None:
            out[c.id] = {"floor_ms": None, "by": None, "flops": None, "bytes": None, "formula": None}
            continue
        t_compute = w.flops / (peak.bf16_tflops * 1e12) * 1e3
        t_memory = w.bytes / (peak.hbm_tb_s * 1e12) * 1e3
        by = "compute" if t_compute >= t_memory else "memory"
        out[c.id] = {"floor_ms": _r(max(t_compute, t_memory), 4), "by": by, "flops": w.flops, "bytes": w.bytes,
                     "formula": w.formula}
    return out


def _causes(table: OpTable, raw: StepRaw, cid: str, measured_ms: float) -> list[dict[str, Any]]:
    out = []
    for c in table.causes:
        if c.op_class != cid:
            continue
        if c.unless is not None and any(k_cls == cid and c.unless.search(kname) for k_cls, kname, _ in raw.by_name):
            continue
        if c.kernel is None and c.range is None:
            ms, n = measured_ms, raw.gaps.get(cid, 0) or raw.by_class_count.get(cid, 0)
        else:
            us, n = 0.0, 0
            for (k_cls, kname, hits), t in raw.by_name.items():
                if k_cls != cid:
                    continue
                if c.kernel is not None and not c.kernel.search(kname):
                    continue
                if c.range is not None and c.id not in hits:
                    continue
                us += t.us
                n += t.count
            ms = us / 1e3
        if ms >= c.min_ms and n:
            out.append({"id": c.id, "cause": c.cause, "fix": c.fix, "reference": c.reference, "ms": _r(ms),
                        "count": n})
    return out


def step_budget(table: OpTable, raw: StepRaw, fl: dict[str, dict[str, Any]], mw: ModelWork | None,
                peak: Peak | None) -> dict[str, Any]:
    """One step's budget table."""
    wall_ms = raw.wall_us / 1e3
    rows = []
    for c in table.classes:
        ms = raw.by_class_us.get(c.id, 0.0) / 1e3
        f = fl[c.id]
        floor_ms = f["floor_ms"]
        rows.append({
            "id": c.id, "title": c.title, "measured_ms": _r(ms), "share": _r(ms / wall_ms if wall_ms else 0.0, 4),
            "count": raw.gaps.get(c.id, 0) if c.id in raw.gaps else raw.by_class_count.get(c.id, 0),
            "floor_ms": floor_ms, "floor_by": f["by"], "flops": f["flops"], "bytes": f["bytes"],
            "floor_formula": f["formula"],
            "gap_ms": None if floor_ms is None else _r(max(0.0, ms - floor_ms)),
            "causes": _causes(table, raw, c.id, ms)})
    unknown: dict[str, list[float]] = {}
    for (k_cls, kname, _), t in raw.by_name.items():
        if k_cls is None:
            e = unknown.setdefault(kname, [0.0, 0])
            e[0] += t.us
            e[1] += t.count
    unc_ms = sum(v[0] for v in unknown.values()) / 1e3
    listed = sorted(unknown.items(), key=lambda kv: (-kv[1][0], kv[0]))
    sum_ms = sum(r["measured_ms"] for r in rows) + unc_ms - raw.overlap_us / 1e3
    known_floors = [r["floor_ms"] for r in rows if r["floor_ms"] is not None]
    floor_complete = len(known_floors) == len(rows) or all(
        r["floor_ms"] is not None or r["measured_ms"] == 0.0 for r in rows)
    at_floor = None
    if known_floors and floor_complete:
        at_floor = sum(known_floors) + unc_ms  # unclassified time kept as measured
    return {
        "name": raw.name, "gpu_time_ms": _r(wall_ms), "sum_ms": _r(sum_ms), "overlap_ms": _r(raw.overlap_us / 1e3),
        "activities": raw.activities, "host_syncs": raw.syncs,
        "coverage": _r(1.0 - unc_ms / wall_ms if wall_ms else 1.0, 4),
        "classes": rows,
        "unclassified": {"ms": _r(unc_ms), "share": _r(unc_ms / wall_ms if wall_ms else 0.0, 4),
                         "kernels": [{"name": n, "ms": _r(v[0] / 1e3), "count": int(v[1])}
                                     for n, v in listed[:TOP_UNCLASSIFIED]],
                         "distinct": len(listed)},
        "step_ms_at_floors": None if at_floor is None else _r(at_floor),
        "mfu": _mfu(mw, peak, wall_ms),
    }


def _mfu(mw: ModelWork | None, peak: Peak | None, wall_ms: float) -> dict[str, Any] | None:
    if mw is None or peak is None or wall_ms <= 0:
        return None
    peak_f = peak.bf16_tflops * 1e12
    flops = floors_mod.model_flops(mw.shape, mw.layers, mw.tokens)
    full = floors_mod.full_layers(mw.shape)
    full_flops = floors_mod.model_flops(mw.shape, full, mw.tokens)
    out: dict[str, Any] = {
        "measured": _r(flops / (wall_ms / 1e3) / peak_f, 4), "model_flops": flops,
        "formula": "6*N*T / (step time * peak), N = matmul weights (LM head included)",
        "full_model_flops": full_flops, "full_layers": dict(sorted(full.items())),
        "projected_step_ms": mw.projected_step_ms, "projected_full": None}
    if mw.projected_step_ms:
        out["projected_full"] = _r(full_flops / (mw.projected_step_ms / 1e3) / peak_f, 4)
    return out


def budget(table: OpTable, raws: list[StepRaw], mw: ModelWork | None, device: str | None,
           source: str) -> dict[str, Any]:
    """The whole budget: every step with GPU activity (a step with none is named, not tabled)."""
    peak = table.peak_for(device)
    fl = floors(table, mw, peak)
    notes = []
    if mw is None:
        notes.append("no model given (--model M and --tokens N): floors and MFU are not computed")
    if device is None:
        notes.append("the trace names no GPU: floors and MFU are not computed")
    elif peak is None:
        notes.append(f"no peak for {device} in matrix/gpus.toml: floors and MFU are not computed")
    steps = [step_budget(table, r, fl, mw, peak) for r in raws if r.activities]
    empty = [r.name for r in raws if not r.activities]
    if not steps:
        notes.append("no GPU activity in any profiled step (a CPU run): there is no GPU time to budget")
    model = None
    if mw is not None:
        model = {"query": mw.query, "layers": dict(sorted(mw.layers.items())), "tokens": mw.tokens,
                 "checkpointing": mw.checkpointing, "mode": "train" if mw.train else "infer",
                 "matmul_parameters": mw.shape.matmul_params(mw.layers)}
    return {"schema": SCHEMA, "source": source, "device": device, "peak": _peak_json(peak), "model": model,
            "steps": steps, "steps_without_gpu_activity": empty, "notes": notes,
            "rules": [{"class": r.op_class, ("range" if r.by_range else "kernel"): r.pattern.pattern,
                       "reference": r.reference} for r in table.rules]}
