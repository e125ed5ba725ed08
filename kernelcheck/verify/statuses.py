"""From what a live run observed to evidence blocks, function statuses, findings and the live section's lines
(typed: report/live.py; their sentences are report/live_text.py's)."""

from __future__ import annotations

from kernelcheck.core import decide, matrix
from kernelcheck.core.status import Finding, FunctionStatus, Severity
from kernelcheck.report import live_text
from kernelcheck.report.live import (
    BenchmarkOnCpuLine,
    BenchmarkPassLines,
    BenchmarkSkippedLine,
    BuiltLine,
    ComparisonFailedLine,
    ComparisonLine,
    ComparisonSkippedLine,
    LiveLine,
    PassError,
    TimingLine,
    TritonCacheLine,
)
from kernelcheck.report.live_details import (
    Benchmark,
    BenchmarkSkipped,
    Compared,
    Comparison,
    ComparisonError,
    ComparisonSkipped,
    ProfiledStep,
    Timing,
    comparison,
)
from kernelcheck.report.model import Report
from kernelcheck.verify import bench, evidence
from kernelcheck.verify.live_evidence import LiveEvidence, RunError
from kernelcheck.verify.steps import (
    LiveRun,
)


# -- from observations to statuses ------------------------------------------------------------------
def function_evidence(run: LiveRun, fn: str, *, m: matrix.Matrix) -> LiveEvidence | None:
    """The evidence for one function: what ran, how often, what it launched (its package's fast kernels and fla's
    backends named by the signatures of the matrix `m`), how it compared."""
    calls = [r for recs in run.records.values() for r in recs if r.function == fn]
    fail = run.failures.get(fn)
    if not calls and fail is None and fn in run.inline:
        return LiveEvidence(run.built.device, "torch", 0, f"inline torch code in {run.inline[fn]}",
                            inline_note="transformers stored no function for it, so the layer ran its own torch code")
    if not calls and fail is None:
        return None
    ranges = [rs for tr in run.traces.values() for rs in tr.ranges if rs.function == fn]
    fwd = [rs for rs in ranges if not rs.backward]
    bwd = [rs for rs in ranges if rs.backward]
    impls = list(dict.fromkeys(r.implementation for r in calls))
    names: dict[str, int] = {}
    for rs in ranges:
        for k, v in rs.kernel_names.items():
            names[k] = names.get(k, 0) + v
    by_count = [k for k, _ in sorted(names.items(), key=lambda kv: -kv[1])]
    backends = None
    if run.package_of.get(fn) == "fla":  # which of fla's backends ran, named from the kernels in each pass
        backends = {"forward": evidence.backends_seen([k for rs in fwd for k in rs.kernel_names], sig=m.signatures),
                    "backward": evidence.backends_seen([k for rs in bwd for k in rs.kernel_names], sig=m.signatures)}
    return LiveEvidence(
        device=run.built.device,
        implementation_called=impls[0] if len(impls) == 1 else impls,
        path="fast" if any(r.fast and not r.forced for r in calls) else "torch",
        calls=len(calls),
        calls_by_step={s: sum(1 for r in recs if r.function == fn) for s, recs in run.records.items()
                       if any(r.function == fn for r in recs)},
        cpu_ops=sum(rs.cpu_ops for rs in fwd),
        gpu_kernels=sum(rs.kernels for rs in fwd),
        backward_cpu_ops=sum(rs.cpu_ops for rs in bwd),
        backward_gpu_kernels=sum(rs.kernels for rs in bwd),
        cpu_ms=round(sum(rs.cpu_us for rs in ranges) / 1000, 3),
        gpu_ms=round(sum(rs.gpu_us for rs in ranges) / 1000, 3),
        kernel_names=by_count[:12],
        fast_kernels_seen=evidence.fast_kernel_names(run.package_of.get(fn, ""), by_count, sig=m.signatures)[:12],
        per_layer=[{"layer": rs.layer, "step": rs.step, "pass": "backward" if rs.backward else "forward",
                    "cpu_ops": rs.cpu_ops, "gpu_kernels": rs.kernels} for rs in ranges],
        backends=backends,
        # what went wrong or was compared: forced torch, NaN, the failure, the reference comparisons
        forced_torch="the torch reference was forced for the rest of the run after the failure below"
        if any(r.forced for r in calls) else None,
        nonfinite_output=fn in run.nonfinite,
        error=RunError(fail.phase, fail.step, fail.error, fail.implementation) if fail is not None else None,
        vs_reference=run.direct.get(fn),
        alone_on_fast_path_vs_reference=run.isolated.get(fn),
    )


def _rule_fix(report: Report, fn: str) -> tuple[str | None, str | None]:
    """(rule id, fix) of a known breakage that names `fn`, from the static rule evaluation."""
    for fd in report.findings:
        if fn in fd.functions and fd.severity == Severity.BROKEN:
            return fd.id, fd.fix
    return None, None


_UNKNOWN_FIX = ("not a known breakage: reinstall {dist} for this torch/CUDA (kernelcheck install --model {model}); "
                "until then `pip uninstall {dist}` gives the slow but working torch path")


def _broken_reason(fn: str, ev: LiveEvidence, run: LiveRun) -> str | None:
    """Why the observed run shows `fn` broken (exception, NaN, mismatch), or None."""
    err, direct, impl = ev.error, ev.vs_reference, ev.implementation_called
    if err:
        reason = f"observed: {err.implementation} raised in the {err.phase} of the {err.step} step: {err.exception}"
        if err.phase == "backward" and ev.path == "fast":
            reason += " (its forward ran the fast path correctly; training fails at the first backward)"
        return reason
    if ev.nonfinite_output or (direct is not None and direct.nonfinite):
        return f"observed: {impl} returned NaN/Inf"
    if direct is not None and direct.compared and direct.ok is False:
        return (f"observed: {impl} disagrees with the torch reference on the same inputs "
                f"(relative error {direct.rel_err} > {direct.tolerance})")
    iso = run.isolated.get(fn)
    if iso and iso.get("ok") is False:
        bad = [f"{s} {k} rel_err {v[k]['rel_err']}" for s, v in iso.items() if isinstance(v, dict)
               for k in ("logits", "grads") if k in v and not v[k]["ok"]]
        return (f"observed: with only {fn} on its bound path ({impl}), the model's results disagree with the torch "
                f"reference ({'; '.join(bad)}; tolerance {iso['tolerance']})")
    if direct is not None and direct.error and ev.path == "fast":
        return f"observed: calling {fn} again on the captured inputs raised {direct.error}"
    return None


def _runtime_error_fix(exception: str, dist: str, model: str, m: matrix.Matrix) -> tuple[str | None, str | None]:
    """(id, fix) of the [[runtime_error]] of matrix/breakages.toml the observed exception's text matches (fla's
    fla#640 guard, TileLang's failed JIT compile), for a failure no static rule predicted."""
    from kernelcheck.core import rules

    hit = rules.match_runtime_error(exception, m)
    if hit is None:
        return None, None
    return hit.id, f"{hit.message} Fix: " + hit.fix.format(dist=dist, model=model)


def observation(report: Report, fs: FunctionStatus, ev: LiveEvidence, run: LiveRun,
                m: matrix.Matrix) -> decide.Observation:
    """What the run showed for `fs`, as evidence for the decider (core/decide.py); `m` names known breakages."""
    broken = _broken_reason(fs.name, ev, run)
    rid, fix = _rule_fix(report, fs.name) if broken else (None, None)
    model = report.model.query if report.model else "M"
    if broken and not fix:
        rid, fix = _runtime_error_fix(ev.error.exception if ev.error else "", fs.package, model or "M", m)
    if broken and not fix:
        fix = _UNKNOWN_FIX.format(dist=fs.package, model=model)
    return decide.Observation(ev.to_json(), ev.path, ev.calls, ev.implementation_called, broken, rid, fix)


def model_findings(run: LiveRun, report: Report) -> list[Finding]:
    out: list[Finding] = []
    for fn, d in sorted(run.direct.items()):
        if d.compared and d.decided is False and d.ok is None:
            out.append(Finding(
                "verify-control-cannot-decide", Severity.FALLBACK,
                f"{fn}: the fast path is within the tolerance {d.tolerance} of the torch reference "
                f"({d.rel_err}), but the same comparison does not tell a fault apart here: the reference with "
                f"{d.perturbed or 'no input perturbed'} differs by {d.positive_rel_err} (the reference rerun: "
                f"{d.negative_rel_err}), not 2x beyond the tolerance; so the match proves nothing at this shape",
                "run verify --shape full (or in float32) where the fault is told apart", None, (fn,)))
    if run.step_error:
        if run.step_error_fast:
            # a fast kernel ran before the failure: it may have left bad state (or the failure is real)
            out.append(Finding("verify-step-failed", Severity.BROKEN,
                               f"the model's {run.built.shape} step failed outside the fast functions after fast "
                               f"kernels ran: {run.step_error}",
                               "rerun with KERNELCHECK_DEBUG=1; check attn_implementation and the transformers "
                               "version"))
        else:
            # only torch code ran: the shrunk model itself does not work, which says nothing about the kernels
            out.append(Finding("verify-incomplete", Severity.WARNING,
                               f"the {run.built.shape} {run.built.model_type} model built from the shrunk config "
                               "failed "
                               f"in torch code, before any fast kernel ran, so nothing was verified: {run.step_error}",
                               "adjust this family's entry in matrix/verify.toml [tiny] (shape relations), or use "
                               "--shape full on a GPU"))
    out.extend(bench.control_findings(run.benchmark))
    mc = run.model_compare
    if mc.get("ok") is False:
        bad = [f"{s} {k} rel_err {v[k]['rel_err']}" for s, v in mc.items() if isinstance(v, dict)
               for k in ("logits", "grads") if k in v and not v[k]["ok"]]
        fast_fns = sorted({r.function for recs in run.records.values() for r in recs if r.fast and not r.forced})
        out.append(Finding("verify-mismatch", Severity.BROKEN,
                           f"the fast path's results disagree with the torch reference on the same weights and inputs "
                           f"({'; '.join(bad)}; tolerance {mc['tolerance']}). Functions on the fast path: "
                           f"{', '.join(fast_fns)}.", None, None, tuple(fast_fns)))
    return out


def comparison_lines(mc: Comparison) -> list[LiveLine]:
    """The reference comparison: skipped, the rel_err per step against the tolerance, or its error."""
    if isinstance(mc, ComparisonSkipped) and mc.skipped:
        return [ComparisonSkippedLine(mc.skipped)]
    if isinstance(mc, Compared):
        return [ComparisonLine(mc.tolerance, tuple(
            PassError(s, v.logits.rel_err, None if v.grads is None else v.grads.rel_err, v.grads is not None)
            for s, v in mc.steps.items()), bool(mc.ok))]
    if isinstance(mc, ComparisonError) and mc.error:
        return [ComparisonFailedLine(mc.error)]
    return []


def _benchmark(bm: Benchmark | None, device: str) -> list[LiveLine]:
    """The benchmark: skipped, or each pass, and a note when no GPU makes the ratio meaningless."""
    if isinstance(bm, BenchmarkSkipped):
        return [BenchmarkSkippedLine(bm.skipped)]
    if bm is None:
        return []
    out: list[LiveLine] = [BenchmarkPassLines(bm.layer, pname, bm.tokens, res) for pname, res in bm.passes.items()]
    if not device.startswith("cuda"):
        out.append(BenchmarkOnCpuLine())
    return out


def live_items(run: LiveRun) -> list[LiveLine]:
    """What the live section says: what was built, launches, Triton cache, comparison, benchmark and time."""
    b = run.built
    out: list[LiveLine] = [BuiltLine(b.model_class, b.shape, tuple(b.layer_types), b.parameters, b.dtype, b.device,
                                     run.tokens)]
    out.extend(evidence.launch_line(tr, b.device) for tr in run.traces.values())
    tc = run.triton
    if tc and (tc["entries_before"] or tc["entries_after"]):  # "0 -> 0 entries" (no Triton here, or none ran): nothing
        out.append(TritonCacheLine(tc["cache_dir"], tc["entries_before"], tc["entries_after"], bool(tc.get("cold"))))
    out.extend(comparison_lines(comparison(run.model_compare)))
    out.extend(_benchmark(run.benchmark, b.device))
    out.append(TimingLine(Timing.from_json(run.timing)))
    return out


def profiled_step(tr: evidence.StepTrace, device: str) -> ProfiledStep:
    """One profiled step's typed statistics (the live section's `steps`) and the trace's reading of it."""
    said = live_text.launch(evidence.launch_line(tr, device))
    return ProfiledStep(tr.stats.row(), tr.launch_bound, said, list(tr.fast_packages), list(tr.fallbacks))
