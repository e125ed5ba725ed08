"""Findings, function statuses, the verdict, and the two renderers (text for people, JSON for tools)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelcheck import SCHEMA
from kernelcheck.core import decide
from kernelcheck.core.status import (  # noqa: F401 - re-exported: the exit codes' and records' home is core/status.py
    EXIT_BROKEN,
    EXIT_CODE,
    EXIT_FALLBACK,
    EXIT_INTERNAL,
    EXIT_READY,
    EXIT_USAGE,
    Finding,
    FunctionStatus,
    worst,
)


@dataclass
class Report:
    command: str
    environment: dict[str, Any]
    model: dict[str, Any] | None
    mode: str | None
    functions: list[FunctionStatus] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # plan, hub, summary, steps ...

    @property
    def verdict(self) -> str:
        return decide.verdict(self.functions, self.findings).value

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[worst([self.verdict])]

    def to_json(self) -> dict[str, Any]:
        out = {
            "schema": SCHEMA,
            "command": self.command,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "environment": self.environment,
            "model": self.model,
            "mode": self.mode,
            "functions": [_drop_none(asdict(f)) for f in self.functions],
            "findings": [_finding_json(f) for f in self.findings],
        }
        out.update(self.extra)
        return out


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    keep = {"reason", "fix", "implementation", "status", "name", "package"}
    return {k: v for k, v in d.items() if v is not None or k in keep}


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
    gpu_s = ", ".join(f"{g['name']} (sm_{g['capability'].replace('.', '')})" for g in gpus) or "none"
    lines = [
        f"  python {env['python']} · {env['platform']} · {torch_s}",
        f"  triton {env.get('triton') or 'absent'} · transformers {env.get('transformers') or 'absent'} · "
        f"kernels {env.get('kernels') or 'absent'}",
        f"  GPUs: {gpu_s} · driver {env.get('driver') or 'none'} · nvcc {env.get('nvcc') or 'absent'}"
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


def render_findings(findings: list[Finding], width: int = 6, references: bool = True) -> list[str]:
    """The `findings` block of a text report: severity, id, message, then its fix and reference."""
    if not findings:
        return []
    out = ["findings"]
    pad = " " * (width + 3)
    for fd in findings:
        out.append(f"  {_SEV.get(fd.severity, fd.severity):<{width}} [{fd.id}] {fd.message}")
        if fd.fix:
            out.append(f"{pad}fix: {fd.fix}")
        if references and fd.reference:
            out.append(f"{pad}ref: {fd.reference}")
    return out


def render_text(report: Report) -> str:
    out: list[str] = []
    head = f"kernelcheck {report.command}"
    if report.model:
        mm = report.model
        head += f" · {mm.get('id') or mm.get('query')} ({mm.get('model_type')}, from {mm.get('source')})"
    if report.mode:
        head += f" · mode {report.mode}"
    out.append(head)
    if report.environment:
        out.append("environment")
        out.extend(environment_lines(report.environment))
    if report.functions:
        out.append("functions")
        width = max(len(f.name) for f in report.functions)
        said: dict[tuple[str | None, str | None], str] = {}  # (why, fix) -> the first function that said it
        for f in report.functions:
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
                # one line of scalars; nested evidence (per layer, comparisons) is in --json
                ev = ", ".join(f"{k}={v}" for k, v in f.evidence.items()
                               if k not in ("kernels", "kernel_names") and not isinstance(v, (dict, list)))
                out.append(f"              evidence: {ev}")
                names = f.evidence.get("kernel_names") or f.evidence.get("kernels")
                if names:
                    out.append(f"              kernels: {', '.join(names[:6])}")
    for section, render in (("plan", _render_plan), ("hub", _render_hub), ("summary", _render_summary),
                            ("live", _render_live)):
        if section in report.extra and report.extra[section]:
            if section == "hub" and report.command != "hub" and report.extra[section].get("used") is False:
                out.extend(_render_hub_unused(report.extra[section]))
                continue
            out.extend(render(report.extra[section]))
    out.extend(render_findings(report.findings))
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


def _render_hub(hub: dict[str, Any]) -> list[str]:
    out = ["hub"]
    for line in hub.get("lines", []):
        out.append(f"  {line}")
    return out


def _render_hub_unused(hub: dict[str, Any]) -> list[str]:
    """Hub kernels are not loaded by this job: one line (the full section is in --json and `kernelcheck hub`)."""
    why = hub.get("why") or "use_kernels is off"
    return [f"hub: Hub kernels are not used: {why}. `kernelcheck hub --model M` shows what use_kernels=True "
            "would load."]


def _render_summary(summary: dict[str, Any]) -> list[str]:
    out = ["summary"]
    for k, v in summary.items():
        if not isinstance(v, (dict, list)):
            out.append(f"  {k}: {v}")
    return out


def _render_live(live: dict[str, Any]) -> list[str]:
    return ["live (verify)"] + [f"  {line}" for line in live.get("lines", [])]
