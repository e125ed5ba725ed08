"""Verdicts on an analysed trace: fast kernels seen, fallback signatures (matrix/signatures.toml),
launch-bound steps, and the findings that say so."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping
from typing import Any

from kernelcheck.core import matrix
from kernelcheck.core.status import Finding, Severity
from kernelcheck.trace.results import SignatureMatch, StepStats, TraceAnalysis


def fmt_ms(us: float) -> str:
    if us >= 1000:
        return f"{us / 1000:,.1f} ms"
    return f"{us:,.0f} us"


_SHORT_RX = re.compile(r"^(void |__global__ )")
_ANON = "(anonymous namespace)::"
# the functor inside a generic elementwise/reduce kernel: what the kernel really computes
_INNER_RX = re.compile(r"at::native::(?:\w+::)*?(\w+?(?:_kernel\w*|_functor\w*|_cuda\w*|Functor\w*))")


def short_name(name: str, width: int = 60) -> str:
    """A kernel name a person can read: no 'void', no parameter list; template arguments folded to <...>
    except the functor that names what a generic at::native kernel computes. Never a bare namespace."""
    full = _SHORT_RX.sub("", name).replace(_ANON, "")
    cut = len(full)
    for ch in "<(":
        i = full.find(ch)
        if 0 < i < cut:
            cut = i
    s = full[:cut]
    if cut < len(full) and full[cut] == "<":
        inner = [m for m in _INNER_RX.findall(full[cut:]) if m not in s and not m.startswith("gpu_kernel")]
        s += f"<{inner[0]}, ...>" if inner else "<...>"
    if not s.strip(":").split("::")[-1]:
        s = full  # a name that would shorten to a bare namespace stays whole
    return s if len(s) <= width else s[: width - 3] + "..."


@functools.lru_cache(maxsize=256)
def _compile(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex for a tuple of fnmatch globs (cached: the same tuples are matched for every step)."""
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)) if patterns else None


def _count_matching(counts: Mapping[str, int], rx: re.Pattern[str] | None) -> tuple[int, list[str]]:
    if rx is None:
        return 0, []
    hits = [(n, c) for n, c in counts.items() if rx.match(n)]
    hits.sort(key=lambda nc: -nc[1])
    return sum(c for _, c in hits), [n for n, _ in hits]


def fast_kernels_in(step: StepStats, *, sig: matrix.TraceSignatures) -> dict[str, list[str]]:
    """Packages whose fast kernels (`sig`, a Matrix's signatures) ran in `step`: {package key: [kernel names]}."""
    out: dict[str, list[str]] = {}
    for pkg, pats in sig.fast_kernels.items():
        _, names = _count_matching(step.kernel_counts, _compile(pats))
        if names:
            out[pkg] = names
    return out


def _match_signature(s: matrix.Signature, step: StepStats, py_names: set[str],
                     fast: dict[str, list[str]], matched: set[str]) -> tuple[str, bool] | None:
    """(evidence in words, by_python_stack) when `s` matches the step, else None."""
    if s.package in fast:
        return None
    if s.context_packages and not any(c in fast or c in matched for c in s.context_packages):
        return None
    rx = _compile(s.python_functions)
    py = sorted(n for n in py_names if rx is not None and rx.match(n))
    if py:
        fn = py[0].rsplit(": ", 1)[-1]
        return f"the Python stack shows `{fn}` ({py[0].rsplit(': ', 1)[0]})", True
    if not s.kernels or step.kernels == 0:
        return None
    parts = []
    for g in s.kernels:
        n, names = _count_matching(step.kernel_counts, _compile(g.patterns))
        if n < g.min:
            return None
        parts.append(f"{g.what}: {n:,} ({short_name(names[0])}{', ...' if len(names) > 1 else ''})")
    return "; ".join(parts), False


def launch_bound_sentence(step: StepStats) -> str:
    """The sentence a user reads, e.g. 'the GPU sat idle 42% of ProfilerStep#2 waiting for launches ...'."""
    bf = step.busy_fraction
    where = "the trace" if step.name == "trace" else step.name
    if bf is None:
        return f"no GPU kernel ran in {where}"
    idle = 1.0 - bf
    d = step.launch_delay_us
    s = (f"the GPU sat idle {idle:.0%} of {where} waiting for launches: {step.kernels:,} kernels of median "
         f"{step.median_kernel_us:.1f} us each, busy {fmt_ms(step.gpu_busy_us)} of {fmt_ms(step.wall_us)}")
    if d.get("count"):
        s += (f"; each kernel started {d['p50'] / 1000:.3f} ms (median) after its launch returned, so the queue "
              "was empty")
    return s


def is_launch_bound(step: StepStats, *, lb: matrix.LaunchBound) -> bool:
    """Low GPU busy fraction with many short kernels that start as soon as they are launched (the thresholds `lb`:
    a Matrix's `signatures.launch_bound`)."""
    bf = step.busy_fraction
    if bf is None or step.kernels < lb.min_kernels:
        return False
    if bf >= lb.busy_fraction_below or step.median_kernel_us >= lb.median_kernel_us_below:
        return False
    d = step.launch_delay_us
    # a full queue (kernels start long after their launch): idle time comes from elsewhere (syncs, copies)
    return not (d.get("count") and d["p50"] >= lb.launch_delay_p50_below_us)


Unit = tuple[StepStats, set[str]]  # a step (or the whole trace) and the Python functions seen in it
Packages = Mapping[str, matrix.PackageInfo]


def _fast_findings(summary: StepStats, fast_any: dict[str, list[str]], pk: Packages,
                   sig: matrix.TraceSignatures) -> list[Finding]:
    """One info finding per package whose fast kernels ran anywhere in the trace."""
    out = []
    for pkg_key, names in fast_any.items():
        title = pk[pkg_key].title if pkg_key in pk else pkg_key
        n = sum(summary.kernel_counts[nm] for nm in names)
        out.append(Finding(
            f"{pkg_key.replace('_', '-')}-kernels-ran", Severity.INFO,
            f"{title} kernels ran: {n:,} launches of {len(names)} kernels "
            f"({', '.join(short_name(x) for x in names[:4])}{', ...' if len(names) > 4 else ''}).",
            None, sig.fast_references.get(pkg_key) or None))
    return out


def _signature_matches(sig: matrix.TraceSignatures, units: list[Unit], pk: Packages) -> list[SignatureMatch]:
    """The fallback signatures that match, each with the steps it matched in and the first step's evidence."""
    matches: list[SignatureMatch] = []
    for s in sig.signatures:
        hit_steps: list[str] = []
        evidence = ""
        by_py = False
        for st, py in units:
            fast = fast_kernels_in(st, sig=sig)
            matched_pkgs = {m.package for m in matches if st.name in m.steps}
            r = _match_signature(s, st, py, fast, matched_pkgs)
            if r is not None:
                hit_steps.append(st.name)
                if not evidence:
                    evidence, by_py = r
        if not hit_steps:
            continue
        pinfo = pk.get(s.package)
        dist = pinfo.install_distribution if pinfo else s.package
        title = pinfo.title if pinfo else s.package
        matches.append(SignatureMatch(s.id, s.package, dist, title, s.functions, tuple(hit_steps), evidence, by_py))
    return matches


def _fallback_findings(matches: list[SignatureMatch], sig: matrix.TraceSignatures, n_units: int,
                       have_steps: bool, cpu_only: bool) -> list[Finding]:
    """A finding per matched signature: a fallback with its fix, or info on a CPU-only trace."""
    out = []
    for m in matches:
        s = next(x for x in sig.signatures if x.id == m.id)
        where = _where(m.steps, n_units, have_steps)
        examples = sig.fast_examples.get(m.package) or sig.fast_kernels.get(m.package, ())[:3]
        named = m.title if m.title == m.distribution else f"{m.title} ({m.distribution})"
        if cpu_only:
            out.append(Finding(
                m.id, Severity.INFO,
                f"{s.title} {where}: {m.evidence}. On CPU this is the only path ({m.title} kernels run only on "
                "GPUs); on the GPU the same trace would mean a slow fallback.", None, s.reference, m.functions))
            continue
        out.append(Finding(
            m.id, Severity.FALLBACK,
            f"{s.title} {where} ({s.what}). Evidence: {m.evidence}; no {m.title} kernel ran. Likely missing: "
            f"{named}, so transformers used its torch reference for {' / '.join(m.functions)}.",
            f"pip install {m.distribution} into the job's environment (kernelcheck install --model M picks a build "
            f"for your torch/CUDA without touching torch), restart the process and record again: the trace should "
            f"then show {', '.join(examples)}. Check first with `kernelcheck doctor --model M`.",
            s.reference, m.functions))
    return out


def _busy_findings(lb_steps: list[StepStats], units: list[Unit], sig: matrix.TraceSignatures,
                   have_steps: bool, after_fallback: bool, cpu_only: bool) -> list[Finding]:
    """The launch-bound finding for the launch-bound steps, else (on a GPU trace) the GPU busy range."""
    if lb_steps:
        worst = min(lb_steps, key=lambda st: st.busy_fraction or 0.0)
        where = _where(tuple(st.name for st in lb_steps), len(units), have_steps)
        cause = (" The kernel count points at the fallback above: fused kernels would launch a few dozen."
                 if after_fallback and not cpu_only else
                 " Fewer, larger kernels (fused kernels, torch.compile, CUDA graphs, a larger batch) keep it busy.")
        return [Finding(
            "launch-bound", Severity.FALLBACK,
            f"launch-bound {where}: {launch_bound_sentence(worst)}. nvidia-smi's utilization only says that some "
            f"kernel was running, not that the GPU was doing useful work, so it does not show this.{cause}",
            None, sig.launch_bound.reference)]
    if not cpu_only:
        bf = [st.busy_fraction for st, _ in units if st.busy_fraction is not None]
        if bf:
            return [Finding(
                "gpu-busy", Severity.INFO,
                f"GPU busy {min(bf):.0%}" + (f"-{max(bf):.0%}" if max(bf) - min(bf) >= 0.005 else "")
                + f" of the {'step' if have_steps else 'trace'} wall time; not launch-bound.")]
    return []


def judge(summary: StepStats, steps: tuple[StepStats, ...], py_all: set[str], py_by_step: list[set[str]],
           metadata: dict[str, Any], n_events: int, path: str | None, size: int | None, gz: bool,
           malformed: int = 0, *, m: matrix.Matrix) -> TraceAnalysis:
    """The trace's verdict: CPU-only, fast kernels, fallback signatures, launch-bound steps, as findings (the
    signatures and packages of the matrix `m`)."""
    sig = m.signatures
    pk = m.packages
    findings: list[Finding] = []
    cpu_only = summary.kernels == 0 and summary.memcpy == 0 and summary.memset == 0
    units: list[Unit] = list(zip(steps, py_by_step, strict=False)) if steps else [(summary, py_all)]
    meta_small = _metadata_summary(metadata)

    if cpu_only:
        findings.append(_cpu_only_finding(meta_small))

    # fast kernels anywhere
    fast_any: dict[str, list[str]] = fast_kernels_in(summary, sig=sig)
    findings.extend(_fast_findings(summary, fast_any, pk, sig))

    # fallback signatures, per step
    matches = _signature_matches(sig, units, pk)
    findings.extend(_fallback_findings(matches, sig, len(units), bool(steps), cpu_only))
    if cpu_only and any(x.by_python_stack for x in matches):
        findings.append(_cpu_only_torch_path([x for x in matches if x.by_python_stack]))

    # launch-bound steps
    lb_steps = [st for st, _ in units if is_launch_bound(st, lb=sig.launch_bound)]
    findings.extend(_busy_findings(lb_steps, units, sig, bool(steps), bool(matches), cpu_only))

    if malformed:
        findings.append(Finding("trace-malformed-events", Severity.WARNING,
                                f"{malformed:,} event(s) had a field of the wrong type (a non-numeric ts or dur, a "
                                "name that is not text, args that are not an object) and were skipped: the numbers "
                                "above come from the other events.",
                                "record the trace again with torch.profiler (export_chrome_trace) if it was edited "
                                "or written by another tool"))
    if not steps:
        findings.append(Finding("trace-no-steps", Severity.INFO,
                                "no ProfilerStep#N in the trace: the whole trace is analysed as one step. Call "
                                "prof.step() once per training/inference step to get per-step numbers."))
    return TraceAnalysis(
        summary=summary, steps=steps, findings=tuple(findings), cpu_only=cpu_only,
        fast_packages=tuple(fast_any), fallbacks=tuple(matches),
        launch_bound_steps=tuple(st.name for st in lb_steps), metadata=meta_small, events=n_events,
        path=path, bytes=size, gzip=gz,
    )


def _cpu_only_finding(meta_small: Mapping[str, Any]) -> Finding:
    why = "no GPU kernel, copy or memset was recorded"
    if meta_small.get("error"):
        why += f" (the profiler noted: {meta_small['error']})"
    elif not meta_small.get("gpus"):
        why += " and the trace lists no GPU"
    return Finding(
        "trace-cpu-only", Severity.INFO,
        f"CPU-only trace: {why}. Counts and spans of CPU ops are shown; GPU busy time, launch delays and "
        "kernel signatures need a trace recorded on the GPU with ProfilerActivity.CUDA.",
        "record on the GPU machine: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA], schedule=...)", "https://pytorch.org/docs/stable/profiler.html")


def _cpu_only_torch_path(matches: list[SignatureMatch]) -> Finding:
    """A trace with no GPU activity whose stacks show a torch reference path: it cannot say which path the job's
    GPU runs, and a gate on the exit code must not pass a trace recorded without ProfilerActivity.CUDA."""
    fns = tuple(dict.fromkeys(f for x in matches for f in x.functions))
    shown = "; ".join(x.evidence for x in matches[:2])
    return Finding(
        "trace-cpu-only-torch-path", Severity.FALLBACK,
        f"no GPU activity was recorded and the stacks show a torch reference path ({shown}): on a CPU that is the "
        "only path, but on a GPU machine it is the slow fallback, and a trace without GPU events cannot tell which "
        "this job runs",
        "record with ProfilerActivity.CUDA: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA], with_stack=True), on the machine the job runs on; then the kernels decide",
        "https://pytorch.org/docs/stable/profiler.html", fns)


def _where(names: tuple[str, ...], total: int, have_steps: bool) -> str:
    if not have_steps:
        return "in the trace"
    if len(names) == total:
        return f"in all {total} steps" if total > 1 else f"in {names[0]}"
    return f"in {len(names)} of {total} steps ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"


def _metadata_summary(md: Mapping[str, Any]) -> dict[str, Any]:
    """The small, useful part of the trace's top-level keys (the GPU it ran on, a profiler error)."""
    out: dict[str, Any] = {}
    gpus = []
    for d in md.get("deviceProperties") or []:
        if isinstance(d, dict):
            cap = f"{d.get('computeMajor', '?')}.{d.get('computeMinor', '?')}"
            gpus.append({"name": d.get("name"), "capability": cap})
    out["gpus"] = gpus
    err = md.get("ERROR") or md.get("error")
    if err:
        out["error"] = str(err)[:300]
    for k in ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "with_stack", "trace_id"):
        if k in md and isinstance(md[k], (str, int, float, bool)):
            out[k] = md[k]
    if isinstance(md.get("distributedInfo"), dict):
        di = md["distributedInfo"]
        out["rank"] = di.get("rank")
        out["world_size"] = di.get("world_size")
    return out
