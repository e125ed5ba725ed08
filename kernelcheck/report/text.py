"""The text for people: every sentence a report shows on the terminal is written here, from the report's typed
values (report/model.py holds them and writes the JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelcheck.core.plan_step import Step
from kernelcheck.core.status import VERDICT_OF_EXIT, VERDICT_WORDS, WORDS, Finding, FunctionStatus, Severity
from kernelcheck.report.device_text import device_words
from kernelcheck.report.model import ErrorReport, HubSection, ImportProof, LiveSection, Report
from kernelcheck.report.trace import StepRow

if TYPE_CHECKING:  # annotations only: a trace's report loads neither
    from kernelcheck.report.sections import EnvironmentView

# a function's status in words. `unsupported` (JSON) is a kernel that does not apply here: this transformers does
# not call it, or this device cannot run it (its why line says which): "N/A", not a failure of the function
STATUS_WORDS = {"fast": "FAST", "fallback": "FALLBACK", "broken": "BROKEN", "unsupported": "N/A"}
_MARK = STATUS_WORDS
_SEV = {"broken": "BROKEN", "fallback": "SLOW", "warning": "WARN", "info": "info"}


def environment_lines(env: EnvironmentView) -> list[str]:
    t = env.torch
    if t:
        torch_s = f"torch {t.version} (CUDA {t.cuda or 'none: CPU build'}, cxx11abi {t.cxx11abi})"
    else:
        torch_s = "torch not installed"
    gpu_s = ", ".join(f"{g.name} ({g.capability.sm})" for g in env.gpus) or "none"
    lines = [
        f"  python {env.python} · {env.platform} · {torch_s}",
        f"  triton {env.triton or 'absent'} · transformers {env.transformers or 'absent'} · "
        f"kernels {env.kernels or 'absent'}",
        f"  GPUs: {gpu_s} · driver {env.driver or 'none'} · nvcc {env.nvcc or 'absent'}"
        + (" (pip's nvidia-cuda-nvcc, not a CUDA toolkit)" if env.nvcc_source == "pip" else "")
        + (f" ({env.cuda_home})" if env.cuda_home else ""),
    ]
    if env.packages:
        parts = []
        for name, st in env.packages.items():
            if not st.installed:
                continue
            parts.append(f"{st.distribution or name} {st.version or '?'}" + ("" if st.imports else " (import fails)"))
        lines.append("  kernel packages: " + (", ".join(parts) if parts else "none installed"))
    return lines


def render_findings(findings: list[Finding], width: int = 6, references: bool = True,
                    verbose: bool = True) -> list[str]:
    """The `findings` block of a text report: severity, id, message, then its fix and reference.

    Not verbose: two or more info findings are one line naming their ids after the others (warnings and
    worse are always in full), so the verdict below is not buried; --verbose and --json show them all."""
    if not findings:
        return []
    out = ["findings"]
    pad = " " * (width + 3)
    infos = [fd for fd in findings if fd.severity == Severity.INFO]
    grouped = not verbose and len(infos) > 1
    for fd in findings:
        if grouped and fd.severity == Severity.INFO:
            continue
        out.append(f"  {_SEV.get(fd.severity, fd.severity):<{width}} [{fd.id}] {fd.message}")
        if fd.fix:
            out.append(f"{pad}fix: {fd.fix}")
        if references and fd.reference:
            out.append(f"{pad}ref: {fd.reference}")
    if grouped:
        ids = [fd.id for fd in infos]  # each id once, with its count: "compile-ok (2)", not "compile-ok, compile-ok"
        named = ", ".join(i + (f" ({ids.count(i)})" if ids.count(i) > 1 else "") for i in dict.fromkeys(ids))
        out.append(f"  {'info':<{width}} {len(infos)} notes: {named} (--verbose shows them, --json lists all)")
    return out


def _render_head(report: Report) -> str:
    """The first line of a text report: command, model (id, model_type, source) and mode."""
    head = f"kernelcheck {report.command}"
    if report.model:
        mm = report.model
        head += f" · {mm.name} ({mm.model_type}, from {mm.source})"
    if report.mode:
        head += f" · mode {report.mode}"
    if report.device is not None:
        head += f" · {device_words(report.device)}"
    return head




def _render_functions(functions: list[FunctionStatus]) -> list[str]:
    """The `functions` block: one line per function, then its why/fix (said once when repeated) and evidence."""
    out = ["functions"]
    width = max(len(f.name) for f in functions)
    said: dict[tuple[str | None, str | None], str] = {}  # (why, fix) -> the first function that said it
    for f in functions:
        note = "" if f.used else "  (not used in this mode)"
        out.append(f"  {_MARK.get(f.status, f.status.upper()):<11} {f.name:<{width}}  {f.package:<22} "
                   f"{f.implementation}{note}")
        first = said.setdefault((f.reason, f.fix), f.name) if (f.reason or f.fix) else f.name
        if first != f.name:  # the same why and fix as a function above: say it once
            out.append(f"              why, fix: as for {first}")
        else:
            if f.reason:
                out.append(f"              why: {f.reason}")
            if f.fix:
                out.append(f"              fix: {f.fix}")
        if f.provider and f.used:
            out.append(f"              runs: {f.provider}")
        if f.evidence:
            out.extend(_render_evidence(f.evidence))
    return out


def _render_evidence(evidence: dict[str, Any]) -> list[str]:
    """A function's evidence lines: one line of scalars, then the kernel names (first six)."""
    # one line of scalars; nested evidence (per layer, comparisons) is in --json
    ev = ", ".join(f"{k}={v}" for k, v in evidence.items()
                   if k not in ("kernels", "kernel_names") and not isinstance(v, (dict, list)))
    out = [f"              evidence: {ev}"]
    names = evidence.get("kernel_names") or evidence.get("kernels")
    if names:
        out.append(f"              kernels: {', '.join(names[:6])}")
    return out


def render_text(report: Report, verbose: bool = True) -> str:
    """The whole text report: head, environment, functions, the optional sections, findings and the verdict.
    `verbose` False groups the info findings into one line (render_findings)."""
    out = _render_body(report, plan=True, verbose=verbose)
    said = VERDICT_WORDS[report.verdict]
    if report.command == "doctor" and report.model is None and not report.functions and report.verdict == "fallback":
        said = "FALLBACK: no kernel was checked without --model (environment and packages only)"
    out.append(f"verdict: {said} (exit {report.exit_code})")
    return "\n".join(out)


def _render_body(report: Report, plan: bool, verbose: bool) -> list[str]:
    """Everything above the verdict line; `plan` False leaves the plan out."""
    out: list[str] = [_render_head(report)]
    if report.environment:
        out.append("environment")
        out.extend(environment_lines(report.environment))
    if report.functions:
        out.extend(_render_functions(report.functions))
    if plan and report.plan:
        out.extend(_render_plan(report.plan))
    if report.hub is not None:
        out.extend(_render_hub_unused(report.hub) if report.command != "hub" and report.hub.used is False
                   else _render_hub(report.hub))
    if report.trace is not None:
        out.extend(_render_summary(report.trace.summary))
    if report.live is not None:
        out.extend(_render_live(report.live))
    if report.compiled is not None:
        out.extend(["compiled (verify --compile)", *(f"  {line}" for line in report.compiled.lines)])
    if report.budget is not None:
        from kernelcheck.report import budget as budget_text

        for label, b in report.budget.paths.items():
            out.extend([f"step budget ({label} path)", *budget_text.text(b)])
    out.extend(render_findings(report.findings, verbose=verbose))
    out.extend(_render_cache(report.import_proof))
    return out


def _render_plan(plan: list[Step]) -> list[str]:
    out = ["plan"]
    num = len(str(len(plan)))  # numbers right-aligned, so "9." and "10." start their columns together
    pad = " " * (num + 4)
    package = max([16, *(len(s.package) for s in plan)])
    for i, step in enumerate(plan, 1):
        out.append(f"  {i:>{num}}. {step.action:<8} {step.package:<{package}} {step.spec or ''}  [{step.source}]")
        out.append(f"{pad}why: {step.reason}")
        if step.command:
            out.append(f"{pad}run: {step.command}")
        for rej in step.rejected:
            out.append(f"{pad}rejected {rej.candidate}: {rej.reason}")
    return out


def _render_hub(hub: HubSection) -> list[str]:
    return ["hub", *(f"  {line}" for line in hub.lines)]


def _render_hub_unused(hub: HubSection) -> list[str]:
    """Hub kernels are not loaded by this job: one line (the full section is in --json and `kernelcheck hub`)."""
    why = hub.why or "use_kernels is off"
    return [f"hub: Hub kernels are not used: {why}. `kernelcheck hub --model M` shows what use_kernels=True "
            "would load."]


def _render_summary(summary: StepRow) -> list[str]:
    return ["summary", *(f"  {k}: {v}" for k, v in summary.plain())]


def _render_cache(proof: ImportProof | None) -> list[str]:
    """Run-to-run state is a note, not a finding: where doctor's import answers came from (JSON `import_proof`)."""
    if proof is None or proof.cache not in ("hit", "baked"):
        return []
    if proof.cache == "baked":
        return [f"cache: which kernel packages import and what transformers binds come from the proof made at "
                f"bake time, {proof.proven_at} ({proof.file}), not proven on this node: its key (the files, "
                "versions, variables, driver and devices it depends on) is this node's; `kernelcheck doctor "
                "--no-cache` proves it here"]
    return [f"cache: which kernel packages import and what transformers binds come from the proof of "
            f"{proof.proven_at} ({proof.file}): nothing it depends on changed since; `kernelcheck doctor "
            "--no-cache` proves it again"]


def _render_live(live: LiveSection) -> list[str]:
    return ["live (verify)"] + [f"  {line}" for line in live.lines]


# install: the verdict line says what it is about (the plan's prediction, the doctor after the install, or nothing
# to change) and carries the command's own exit code, which can differ from the report's (--arch: the worst of the
# doctor after the install and the plan's prediction).


def render_install(report: Report, code: int, dry_run: bool, verbose: bool = True) -> str:
    """install's text: the report (without the plan after a real install: it was printed before anything ran)
    and its verdict line with the command's exit code."""
    out = _render_body(report, plan=dry_run, verbose=verbose)
    unchanged = any(f.id == "install-nothing-to-change" for f in report.findings)
    pre = "predicted after this plan" if dry_run else "nothing to change" if unchanged else "after install"
    out.append(f"verdict ({pre}): {WORDS[VERDICT_OF_EXIT[code]] if code in VERDICT_OF_EXIT else 'ERROR'} (exit {code})"
               + ("  [dry run: nothing was changed]" if dry_run else ""))
    return "\n".join(out)


def render_install_plan(report: Report) -> str:
    """install's plan, printed before anything runs: the head line and the plan."""
    return "\n".join([_render_head(report), *(_render_plan(report.plan) if report.plan else [])])


def render_doctor_after(after: Report | ErrorReport | None, exit_code: int, stderr: str) -> str:
    """The doctor run after an install (a fresh process): its report as doctor prints it, the error it stopped
    on, or, when it printed no report, its exit code and the end of its stderr."""
    if isinstance(after, Report):
        return render_text(after)
    if isinstance(after, ErrorReport):
        return f"doctor: {after.error}"
    return f"doctor did not run (exit {exit_code}): {stderr.strip()[-1000:]}"
