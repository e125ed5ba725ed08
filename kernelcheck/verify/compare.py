"""The fast path against the torch reference: per function on captured inputs, per step on the
same weights, and one function at a time to name the one that disagrees."""

from __future__ import annotations

import math
from typing import Any

from kernelcheck.verify.instrument import Instrument
from kernelcheck.verify.live_evidence import DirectComparison
from kernelcheck.verify.steps import (
    LiveRun,
    Steps,
    first_line,
    run_all,
)


def _rel_err(a: Any, b: Any) -> tuple[float, float]:
    """(relative L2 error, max abs error) of a against reference b, in fp32."""
    a, b = a.detach().float(), b.detach().float()
    if a.shape != b.shape:
        return math.inf, math.inf
    diff = (a - b)
    denom = float(b.norm()) or 1.0
    return float(diff.norm()) / denom, float(diff.abs().max()) if diff.numel() else 0.0


def _compare_outputs(fast: Any, ref: Any) -> tuple[float, float, bool]:
    """Worst (rel, abs) error over the tensors of two outputs; and whether the fast one has NaN/Inf."""
    import torch

    fa = [t for t in (fast if isinstance(fast, (tuple, list)) else [fast]) if isinstance(t, torch.Tensor)]
    ra = [t for t in (ref if isinstance(ref, (tuple, list)) else [ref]) if isinstance(t, torch.Tensor)]
    worst_rel = worst_abs = 0.0
    nonfinite = False
    for a, b in zip(fa, ra, strict=False):
        if a.is_floating_point() and not bool(torch.isfinite(a).all()):
            nonfinite = True
        rel, ab = _rel_err(a, b)
        worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, ab)
    return worst_rel, worst_abs, nonfinite


def direct_compare(inst: Instrument, tol: float) -> dict[str, DirectComparison]:
    """Each captured function called twice on the same inputs: the bound path and the torch reference."""
    out: dict[str, DirectComparison] = {}
    for fn, hook in inst.hooks.items():
        if fn not in inst.capture:
            continue
        if not hook.fast_bound:
            out[fn] = DirectComparison(False, why="the torch reference itself is bound: nothing to compare")
            continue
        if hook.torch_function is None:
            out[fn] = DirectComparison(False, why="the reference is inline code in the layer")
            continue
        try:
            ref = inst.call_direct(fn, reference=True)
        except Exception as exc:  # noqa: BLE001
            out[fn] = DirectComparison(False, why=f"the torch reference raised {type(exc).__name__}: {exc}")
            continue
        try:
            fast = inst.call_direct(fn, reference=False)
        except Exception as exc:  # noqa: BLE001
            out[fn] = DirectComparison(False, error=f"{type(exc).__name__}: {first_line(exc)}")
            continue
        rel, ab, nonfinite = _compare_outputs(fast, ref)
        out[fn] = DirectComparison(True, rel_err=_round(rel), max_abs_err=_round(ab), tolerance=tol,
                                   nonfinite=nonfinite, ok=(not nonfinite) and rel <= tol)
    return out


def _round(x: float) -> float | None:
    if math.isinf(x) or math.isnan(x):
        return None
    return float(f"{x:.3g}")


def compare_results(fast: dict[str, dict[str, Any]], ref: dict[str, dict[str, Any]], tol: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for step, res in fast.items():
        if step not in ref:
            continue
        entry: dict[str, Any] = {}
        rel, ab = _rel_err(res["logits"], ref[step]["logits"])
        entry["logits"] = {"rel_err": _round(rel), "max_abs_err": _round(ab), "ok": rel <= tol}
        if "grads" in res:
            # Global relative error over all gradients, plus the worst single parameter: in bf16 a tiny
            # gradient (A_log, dt_bias) can carry a large relative error from rounding alone, so a single
            # parameter only fails the check at 10x the tolerance; wrong kernels (fla#640) are off by O(1).
            worst, worst_name, num, den = 0.0, "", 0.0, 0.0
            for name, g in res["grads"].items():
                r_g = ref[step]["grads"].get(name)
                if r_g is None:
                    continue
                r, _ = _rel_err(g, r_g)
                num += float((g - r_g).norm()) ** 2
                den += float(r_g.norm()) ** 2
                if not r <= worst:
                    worst, worst_name = r, name
            glob = math.sqrt(num) / (math.sqrt(den) or 1.0)
            entry["grads"] = {"rel_err": _round(glob), "worst_parameter": worst_name,
                              "worst_parameter_rel_err": _round(worst), "parameters": len(res["grads"]),
                              "ok": glob <= tol and worst <= 10 * tol}
        entry["ok"] = all(v["ok"] for v in entry.values() if isinstance(v, dict))
        out[step] = entry
    out["tolerance"] = tol
    out["ok"] = all(v["ok"] for k, v in out.items() if isinstance(v, dict))
    return out


def isolate(steps: Steps, inst: Instrument, run: LiveRun, ref: dict[str, dict[str, Any]],
             tol: float) -> dict[str, dict[str, Any]]:
    """The results disagree: run again with one function at a time on its bound path, the rest on the
    reference, to name the function whose output or gradients are wrong (fla#640 before 0.5 was silent)."""
    out: dict[str, dict[str, Any]] = {}
    for fn, hook in inst.hooks.items():
        if not hook.fast_bound or fn in run.failures:
            continue
        inst.forced = set(inst.hooks) - {fn}
        inst.reset()
        try:
            out[fn] = compare_results(run_all(steps), ref, tol)
        except Exception as exc:  # noqa: BLE001
            out[fn] = {"error": f"{type(exc).__name__}: {first_line(exc)}", "ok": None}
    return out
