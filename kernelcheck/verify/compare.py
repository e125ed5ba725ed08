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
        neg, pos, what = controls(inst, fn, ref)
        decided = decides(tol, neg, pos)
        ok = (not nonfinite) and rel <= tol
        out[fn] = DirectComparison(True, rel_err=_round(rel), max_abs_err=_round(ab), tolerance=tol,
                                   nonfinite=nonfinite, ok=ok if decided or not ok else None,
                                   negative_rel_err=_round(neg), positive_rel_err=_round(pos), perturbed=what,
                                   decided=decided)
    return out


CONTROL_SCALE = 1.5  # the positive control's fault: a weight or input scaled by this; a gate or state is dropped
CONTROL_MARGIN = 2.0  # the positive control must exceed the tolerance (and the negative control) this many times
_PERTURB = ("g", "initial_state", "weight", "beta")  # the argument the fault goes into, first present


def _perturbed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any], str | None]:
    """The captured call with one fault: the gate or the state dropped (zeros: a kernel that ignores it), else a
    weight by name or the first float tensor scaled."""
    import torch

    def scaled(t: Any) -> Any:
        return t * CONTROL_SCALE

    for name in _PERTURB:
        v = kwargs.get(name)
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            dropped = name in ("g", "initial_state")
            return args, {**kwargs, name: torch.zeros_like(v) if dropped else scaled(v)}, (
                f"{name} dropped" if dropped else f"{name} x{CONTROL_SCALE:g}")
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return (*args[:i], scaled(a), *args[i + 1:]), kwargs, f"argument {i} x{CONTROL_SCALE:g}"
    return args, kwargs, None


def controls(inst: Instrument, fn: str, ref: Any) -> tuple[float, float, str | None]:
    """(negative: the reference called again on the same inputs, positive: the reference with a perturbed input,
    each as a relative error against the reference, and the input perturbed); nan where one could not run."""
    from kernelcheck.verify.instrument import _clone_args

    hook = inst.hooks[fn]
    try:
        neg = _compare_outputs(inst.call_direct(fn, reference=True), ref)[0]
    except Exception:  # noqa: BLE001 - a control that cannot run decides nothing
        neg = math.nan
    args, kwargs = _clone_args(*inst.capture[fn])
    args, kwargs, what = _perturbed(args, kwargs)
    if what is None or hook.torch_function is None:
        return neg, math.nan, None
    try:
        pos = _compare_outputs(hook.torch_function(*args, **kwargs), ref)[0]
    except Exception:  # noqa: BLE001
        pos = math.nan
    return neg, pos, what


def decides(tol: float, negative: float, positive: float) -> bool:
    """The comparison can tell a wrong kernel from a right one here: the fault's error is `CONTROL_MARGIN` times
    beyond both the tolerance and the reference's own rerun noise."""
    if math.isnan(negative) or math.isnan(positive):
        return False
    return positive > CONTROL_MARGIN * max(tol, negative)


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
