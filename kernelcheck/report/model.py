"""Findings, function statuses, the verdict, and the two renderers (text for people, JSON for tools)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelcheck import schemas
from kernelcheck.core import decide
from kernelcheck.core.capability import sm_name
from kernelcheck.core.status import (  # noqa: F401 - re-exported: the exit codes' and records' home is core/status.py
    EXIT_BROKEN,
    EXIT_CODE,
    EXIT_FALLBACK,
    EXIT_INTERNAL,
    EXIT_READY,
    EXIT_USAGE,
    Finding,
    FunctionStatus,
    Severity,
    worst,
)


@dataclass(frozen=True)
class Needs:
    """What the model needs (doctor): its fast functions, their packages, the attention implementation."""

    functions: list[str]
    packages: list[str]
    attn_implementation: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Bindings:
    """How doctor read transformers' bindings: the regime and the modeling module."""

    regime: str
    module: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HubSection:
    """The Kernel Hub section (hub/check.py); `kernelcheck hub --repo` adds to `repos` and `lines`."""

    lines: list[str]
    used: bool
    why: str | None
    device: str
    mode: str
    offline: bool
    transformers: dict[str, Any]
    mapping: list[dict[str, Any]]
    names: list[dict[str, Any]]
    repos: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class LiveSection:
    """What running the real layers showed (verify): whether it ran, its lines, and the run's details."""

    ran: bool
    lines: list[str]
    step: bool = False  # verify --step: the step section holds the details
    details: dict[str, Any] | None = None  # device, dtype, shape, tokens, model, ..., timing (a full run)
    captured_output: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ran": self.ran}
        if self.step:
            out["step"] = True
        out.update(self.details or {})
        out["lines"] = self.lines
        if self.details is not None:
            out["captured_output"] = self.captured_output
        return out


@dataclass(frozen=True)
class Before:
    """install: the doctor's verdict and statuses before anything was installed."""

    verdict: str
    functions: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "functions": dict(self.functions)}


@dataclass(frozen=True)
class ImportProof:
    """doctor: where the import answers came from (doctor/imports.py, doctor/proofcache.py): `source` proven |
    cache; `cache` off | hit | stored | not stored; the proof file and when it was made."""

    source: str
    cache: str
    file: str | None = None
    proven_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "cache": self.cache, "file": self.file, "proven_at": self.proven_at}


@dataclass(frozen=True)
class Prediction:
    """install: a plan that was not carried out (dry run, blocked) or a Hub pre-fetch: its predicted verdict.
    `lock` is the kernels lock a Hub pre-fetch wrote (None when it wrote none); `has_lock` says the key is shown."""

    predicted: str
    executed: bool
    lock: str | None = None
    has_lock: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"predicted": self.predicted, "executed": self.executed}
        if self.has_lock:
            out["lock"] = self.lock
        return out


@dataclass(frozen=True)
class Installed:
    """install: what was installed, the manifest, how long it took, and the doctor run after it (its JSON)."""

    installed: list[dict[str, Any]]
    manifest: Any
    install_seconds: float
    doctor_after: dict[str, Any] | None = None
    has_doctor_after: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {"installed": self.installed, "manifest": self.manifest, "install_seconds": self.install_seconds}
        if self.has_doctor_after:
            out["doctor_after"] = self.doctor_after
        return out


@dataclass
class TraceSection:
    """trace: the file and its diagnosis (`trace`), the whole-trace `summary`, one row per step, the breakdown."""

    trace: dict[str, Any]
    summary: dict[str, Any]
    steps: list[Mapping[str, Any]]
    breakdown: Mapping[str, Any] | None = None
    annotated: dict[str, Any] | None = None  # --annotate: the file written and its instant events

    def to_json(self) -> dict[str, Any]:
        trace = {**self.trace, **({"annotated": self.annotated} if self.annotated is not None else {})}
        out: dict[str, Any] = {"trace": trace, "summary": self.summary, "steps": self.steps}
        if self.breakdown:
            out["breakdown"] = self.breakdown
        return out


# Report.sections_json's order: each typed section's JSON key after `findings`; "json": key -> section.to_json(),
# "raw": key -> the value itself, "merge": the section's own keys merged in at that place.
_SECTIONS: tuple[tuple[str, str], ...] = (
    ("needs", "json"), ("bindings", "json"), ("before", "json"), ("plan", "raw"), ("prediction", "merge"),
    ("installed", "merge"), ("hub", "json"), ("step", "raw"), ("live", "json"), ("packing", "raw"),
    ("import_proof", "json"), ("trace", "merge"), ("backends", "raw"),
)


@dataclass
class Report:
    command: str
    environment: dict[str, Any]
    model: dict[str, Any] | None
    mode: str | None
    functions: list[FunctionStatus] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # the typed sections, each written by one module; JSON shows the set ones in this order
    needs: Needs | None = None  # doctor
    bindings: Bindings | None = None  # doctor
    before: Before | None = None  # install
    plan: list[dict[str, Any]] | None = None  # install, hub --prefetch
    prediction: Prediction | None = None  # install (dry run, blocked, --source hub)
    installed: Installed | None = None  # install
    hub: HubSection | None = None  # hub/check.py
    step: dict[str, Any] | None = None  # verify --step (verify/step.py)
    live: LiveSection | None = None  # verify, doctor --live
    packing: dict[str, Any] | None = None  # doctor (packing/findings.py)
    import_proof: ImportProof | None = None  # doctor (doctor/imports.py)
    trace: TraceSection | None = None  # trace
    backends: dict[str, Any] | None = None  # doctor: the backend of each fla op (doctor/backends.py)

    @property
    def verdict(self) -> str:
        return decide.verdict(self.functions, self.findings).value

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[worst([self.verdict])]

    def sections_json(self) -> dict[str, Any]:
        """The typed sections as the JSON keys after `findings`."""
        out: dict[str, Any] = {}
        for name, how in _SECTIONS:
            sec = getattr(self, name)
            if sec is None:
                continue
            if how == "merge":
                out.update(sec.to_json())
            elif how == "json":
                out[name] = sec.to_json()
            else:
                out[name] = sec
        return out

    def to_json(self) -> dict[str, Any]:
        out = {
            "schema": schemas.schema_id(self.command),  # one id per report kind
            "command": self.command,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "environment": self.environment,
            "model": self.model,
            "mode": self.mode,
            "functions": [_drop_none(asdict(f)) for f in self.functions],
            "findings": [_finding_json(f) for f in self.findings],
        }
        out.update(self.sections_json())
        return out


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    keep = {"reason", "fix", "implementation", "status", "name", "package"}
    return {k: v for k, v in d.items() if (v is not None or k in keep) and k != "cause"}  # cause: decisions only


def _finding_json(f: Finding) -> dict[str, Any]:
    d = asdict(f)
    d["functions"] = list(f.functions)
    return d


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, default=str)


_MARK = {"fast": "FAST", "fallback": "FALLBACK", "broken": "BROKEN", "unsupported": "UNSUPPORTED"}
_SEV = {"broken": "BROKEN", "fallback": "SLOW", "warning": "WARN", "info": "info"}


def environment_lines(env: dict[str, Any]) -> list[str]:
    t = env.get("torch")
    if t:
        torch_s = f"torch {t['version']} (CUDA {t['cuda'] or 'none: CPU build'}, cxx11abi {t['cxx11abi']})"
    else:
        torch_s = "torch not installed"
    gpus = env.get("gpus") or []
    gpu_s = ", ".join(f"{g['name']} ({sm_name(g['capability'])})" for g in gpus) or "none"
    lines = [
        f"  python {env['python']} · {env['platform']} · {torch_s}",
        f"  triton {env.get('triton') or 'absent'} · transformers {env.get('transformers') or 'absent'} · "
        f"kernels {env.get('kernels') or 'absent'}",
        f"  GPUs: {gpu_s} · driver {env.get('driver') or 'none'} · nvcc {env.get('nvcc') or 'absent'}"
        + (" (pip's nvidia-cuda-nvcc, not a CUDA toolkit)" if env.get("nvcc_source") == "pip" else "")
        + (f" ({env['cuda_home']})" if env.get("cuda_home") else ""),
    ]
    pk = env.get("packages") or {}
    if pk:
        parts = []
        for name, st in pk.items():
            if not st["installed"]:
                continue
            parts.append(f"{st['distribution'] or name} {st['version'] or '?'}"
                         + ("" if st["imports"] else " (import fails)"))
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
        out.append(f"  {'info':<{width}} {len(infos)} notes: {', '.join(fd.id for fd in infos)} "
                   "(--verbose shows them, --json lists all)")
    return out


def _render_head(report: Report) -> str:
    """The first line of a text report: command, model (id, model_type, source) and mode."""
    head = f"kernelcheck {report.command}"
    if report.model:
        mm = report.model
        head += f" · {mm.get('id') or mm.get('query')} ({mm.get('model_type')}, from {mm.get('source')})"
    if report.mode:
        head += f" · mode {report.mode}"
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
    out: list[str] = [_render_head(report)]
    if report.environment:
        out.append("environment")
        out.extend(environment_lines(report.environment))
    if report.functions:
        out.extend(_render_functions(report.functions))
    if report.plan:
        out.extend(_render_plan(report.plan))
    if report.hub is not None:
        out.extend(_render_hub_unused(report.hub) if report.command != "hub" and report.hub.used is False
                   else _render_hub(report.hub))
    if report.trace is not None and report.trace.summary:
        out.extend(_render_summary(report.trace.summary))
    if report.live is not None:
        out.extend(_render_live(report.live))
    out.extend(render_findings(report.findings, verbose=verbose))
    out.extend(_render_cache(report.import_proof))
    v = report.verdict
    words = {"ready": "READY: every fast kernel this job uses will run",
             "fallback": "FALLBACK: a slow torch path would run",
             "broken": "BROKEN: the job would crash, refuse, or compute wrong results"}
    out.append(f"verdict: {words[v]} (exit {report.exit_code})")
    return "\n".join(out)


def _render_plan(plan: list[dict[str, Any]]) -> list[str]:
    out = ["plan"]
    for i, step in enumerate(plan, 1):
        out.append(f"  {i}. {step['action']:<8} {step['package']:<16} {step.get('spec') or ''}  [{step['source']}]")
        out.append(f"     why: {step['reason']}")
        if step.get("command"):
            out.append(f"     run: {step['command']}")
        for rej in step.get("rejected", []):
            out.append(f"     rejected {rej['candidate']}: {rej['reason']}")
    return out


def _render_hub(hub: HubSection) -> list[str]:
    return ["hub", *(f"  {line}" for line in hub.lines)]


def _render_hub_unused(hub: HubSection) -> list[str]:
    """Hub kernels are not loaded by this job: one line (the full section is in --json and `kernelcheck hub`)."""
    why = hub.why or "use_kernels is off"
    return [f"hub: Hub kernels are not used: {why}. `kernelcheck hub --model M` shows what use_kernels=True "
            "would load."]


def _render_summary(summary: dict[str, Any]) -> list[str]:
    out = ["summary"]
    for k, v in summary.items():
        if not isinstance(v, (dict, list)):
            out.append(f"  {k}: {v}")
    return out


def _render_cache(proof: ImportProof | None) -> list[str]:
    """Run-to-run state is a note, not a finding: where doctor's import answers came from (JSON `import_proof`)."""
    if proof is None or proof.cache != "hit":
        return []
    return [f"cache: which kernel packages import and what transformers binds come from the proof of "
            f"{proof.proven_at} ({proof.file}): nothing it depends on changed since; `kernelcheck doctor "
            "--no-cache` proves it again"]


def _render_live(live: LiveSection) -> list[str]:
    return ["live (verify)"] + [f"  {line}" for line in live.lines]
