"""The trace report and its text: what was in the trace, one line per step, top kernels, verdict."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from kernelcheck.core.capability import sm_name
from kernelcheck.report.model import Report
from kernelcheck.report.progress import Progress
from kernelcheck.report.text import render_findings
from kernelcheck.report.trace import StepRow, TraceFile, TraceSection
from kernelcheck.trace.results import TraceAnalysis
from kernelcheck.trace.verdicts import fmt_ms, short_name


def report_of(a: TraceAnalysis) -> Report:
    """The Report for an analysis: `summary` and `steps` as in DESIGN.md, `trace` (file, GPUs, verdict)."""
    r = Report("trace", None, None, None)
    r.findings.extend(a.findings)
    r.trace = TraceSection(TraceFile(
        file=a.path, bytes=a.bytes, gzip=a.gzip, events=a.events, cpu_only=a.cpu_only,
        gpus=list(a.metadata.get("gpus") or []), profiler_error=a.metadata.get("error"),
        diagnosis=a.diagnosis, missing_packages=list(a.missing_packages),
        fast_packages=list(a.fast_packages), launch_bound_steps=list(a.launch_bound_steps),
        fallback_signatures=[m.reported() for m in a.fallbacks],
    ), summary=a.summary.row(), steps=[s.row() for s in a.steps], breakdown=a.breakdown or None)
    return r


def render_text(report: Report) -> str:
    """The ten-second read: what was in the trace, one line per step, top kernels, findings, verdict."""
    if report.trace is None:
        raise ValueError(f"a {report.command} report has no trace section")
    sec = report.trace
    t, s, steps = sec.trace, sec.summary, sec.steps
    out: list[str] = []
    gpus = ", ".join(f"{g['name']} ({sm_name(g['capability'])})" for g in t.gpus) or "no GPU listed"
    out.append(f"kernelcheck trace · {t.file} · {(t.bytes or 0) / 1e6:,.1f} MB{' gzip' if t.gzip else ''} · "
               f"{t.events:,} events · {gpus}")
    head = f"  {'step':<15} {'CPU ops':>8} {'kernels':>7} {'cpy/set':>7} {'CPU span':>9} {'GPU busy':>13} " \
           f"{'idle gaps':>15} {'launch p50/p90':>16}"  # 99 columns: fits a 100-column pipe
    out.append(head)
    shown = _steps_to_show(steps)
    for row in shown:
        out.append("  " + _row(row))
    if len(shown) < len(steps):
        out.append(f"  ... {len(steps) - len(shown):,} more steps not shown (first, last and the least GPU-busy or "
                   "longest are); --json lists all")
    out.append("  " + _row(s))
    out.extend(_top_lines(t, s))
    out.extend(_delay_lines(s, launch_bound=bool(t.launch_bound_steps)))
    out.extend(_breakdown_lines(sec.breakdown or {}))
    out.extend(render_findings(report.findings, width=5, references=False))
    out.append(f"verdict: {_verdict_words(t, report.exit_code)} (exit {report.exit_code})")
    return "\n".join(out)


def _top_lines(t: TraceFile, s: StepRow) -> list[str]:
    """The top kernels by time and by count (GPU traces), or the top CPU ops by count (CPU-only traces)."""
    out: list[str] = []
    if not t.cpu_only:
        for items, label in ((s.top_kernels_by_time, "top kernels by time"),
                             (s.top_kernels_by_count, "top kernels by count")):
            if items:
                out.append(f"{label} (whole trace)")
                for k in items[:5]:
                    out.append(f"  {k.count:>7,} x  {fmt_ms(k.total_us):>10}  {short_name(k.name, 72)}")
    else:
        ops = s.top_ops_by_count
        if ops:
            out.append("top CPU ops by count (whole trace)")
            out.append("  " + ", ".join(f"{o.name} {o.count:,}" for o in ops[:6]))
    return out


def _verdict_words(t: TraceFile, exit_code: int = 0) -> str:
    """The verdict line's words for the trace's diagnosis."""
    diag = t.diagnosis
    if t.cpu_only and exit_code == 3:
        words = "FALLBACK: no GPU activity recorded and the stacks show a torch reference path"
    elif diag == "fallback":
        words = f"FALLBACK: a torch reference path ran; likely missing: {', '.join(t.missing_packages)}"
    elif diag == "launch-bound":
        words = "FALLBACK: launch-bound: the GPU waited for the CPU to launch many small kernels"
    elif t.cpu_only:
        words = "READY as far as a CPU-only trace can tell (no GPU activity recorded)"
    else:
        words = "READY: no fallback signature, the GPU was kept busy"
    return words


def _delay_lines(s: StepRow, launch_bound: bool = True) -> list[str]:
    """The launch delay in words; a short one means the GPU waited only where the trace is launch-bound."""
    d = s.launch_delay_us
    if not d.count:
        return []
    p50 = d.p50 / 1000
    if p50 >= 1.0:
        return [f"launch delay: kernels started {p50:,.1f} ms (median; p90 {d.p90 / 1000:,.1f} ms) after their "
                "launch: the CPU runs ahead of the GPU and keeps a deep queue of launched kernels. That is GOOD: "
                "the GPU never waits for Python."]
    if launch_bound:
        return [f"launch delay: kernels started {p50:,.3f} ms (median) after their launch: the queue was nearly "
                "empty, so the GPU waited for the CPU to launch each one (healthy steps show hundreds of ms here)."]
    return [f"launch delay: kernels started {p50:,.3f} ms (median) after their launch: the CPU launched each kernel "
            "just in time. The GPU stayed busy (not launch-bound), so this costs nothing here; a slower CPU side "
            "(more Python per step) would leave the GPU idle."]


def _breakdown_lines(b: Mapping[str, Any]) -> list[str]:
    """Phases (forward / backward / optimizer) and layer types, where the trace marks them."""
    out: list[str] = []
    phases = b.get("phases") or {}
    steps = max(1, int(b.get("profiled_steps") or 1))
    if phases:
        out.append(f"phases per step (marked by {b.get('marked_by')}): " + "; ".join(
            f"{n} {p['ms'] / steps:,.1f} ms, {p['kernels'] // steps:,} kernels" for n, p in phases.items()))
    for typ, e in (b.get("layer_types") or {}).items():
        if typ.startswith("_"):
            continue
        f, bw = e["forward"], e["backward"]
        per = steps * max(1, e["layers"])
        out.append(f"  layer type {typ} ({e['layers']} layers): per layer and step forward "
                   f"{f['cost_ms'] / per:,.2f} ms / {f['kernels'] // per:,} kernels, backward "
                   f"{bw['cost_ms'] / per:,.2f} ms / {bw['kernels'] // per:,} kernels")
    return out


MAX_STEP_ROWS = 8


def _steps_to_show(steps: list[StepRow]) -> list[StepRow]:
    """All steps when few; else the first two, the last two and the four that matter most, in order."""
    if len(steps) <= MAX_STEP_ROWS:
        return list(steps)
    keep = {0, 1, len(steps) - 2, len(steps) - 1}

    def badness(i: int) -> float:
        bf = steps[i].gpu_busy_fraction
        return -bf if bf is not None else steps[i].cpu_span_us

    keep.update(sorted(range(len(steps)), key=badness, reverse=True)[: MAX_STEP_ROWS - len(keep)])
    return [steps[i] for i in sorted(keep)]


def _row(st: StepRow) -> str:
    name = "whole trace" if st.name == "trace" else st.name
    bf = st.gpu_busy_fraction
    busy = "-" if bf is None else f"{fmt_ms(st.gpu_busy_us)} ({bf:.0%})"
    g = st.idle_gaps
    gaps = "-" if not st.kernels else f"{g.count:,} · {fmt_ms(g.total_us)}"
    d = st.launch_delay_us
    delay = "-" if not d.count else f"{d.p50 / 1000:,.3f} / {d.p90 / 1000:,.3f} ms"
    cs = f"{st.memcpy}/{st.memset}"
    return (f"{name:<15} {st.cpu_ops:>8,} {st.kernels:>7,} {cs:>7} {fmt_ms(st.cpu_span_us):>9} {busy:>13} "
            f"{gaps:>15} {delay:>16}")


_BARS: dict[str, Progress] = {}


def progress_to_stderr(done: int, total: int) -> None:
    """Progress for big traces (32 MB and more), on stderr so --json stays clean: redrawn in place on a
    terminal, a plain line every 30 s elsewhere (a CI log gets no carriage returns; report/progress.py)."""
    if total < 32 << 20:
        return
    bar = _BARS.get("trace")
    if bar is None or bar.total != total or bar.stream is not sys.stderr:
        bar = _BARS["trace"] = Progress(total, "reading trace")
    bar.update(done)
    if done >= total:
        bar.close()
        _BARS.pop("trace", None)
