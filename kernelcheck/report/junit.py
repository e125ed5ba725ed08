"""JUnit XML for CI dashboards: one test case per function, so a red job says which kernel and why.

Any `Report` (doctor, verify, ...) renders the same way:

* one `<testcase>` per function, `classname="kernelcheck.<command>.<model>"`, `name=<function>`;
* a function that makes the verdict non-ready (fallback, unsupported, broken) is a `<failure>` whose
  `type` is its status and whose text holds the reason, the fix, the implementation transformers
  bound and, for `verify`, the evidence; a function not used in this mode (decode in train) is
  `<skipped>` with the reason;
* a broken/fallback finding is folded into the test case of a function it names, or, when it names
  none of the report's functions (an environment-wide problem), becomes its own `finding:<id>` case;
* the environment (torch/CUDA, triton, transformers, GPUs, driver, kernel packages) goes into
  `<properties>`, and the full text report into the suite's `<system-out>`.

The invariant the gates rely on: the file has a failure exactly when the command exits 3 or 4, so
the dashboard and the exit code never disagree. The layout follows the common JUnit schema
(Jenkins/Surefire `junit-10.xsd`: `testsuites` > `testsuite` with tests/failures/errors/skipped counts).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import EXIT_USAGE, SEVERITY_RANK, Finding, FunctionStatus, Severity, Status
from kernelcheck.core.version import __version__
from kernelcheck.report.model import Report
from kernelcheck.report.sections import EnvironmentView
from kernelcheck.report.step import Failed, PathProjection, StepSection
from kernelcheck.report.text import render_text

_FAILING = (Severity.FALLBACK, Severity.BROKEN)
# Characters XML 1.0 cannot carry at all (a traceback or a binary path could hold them).
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: Any) -> str:
    return _BAD_XML.sub("?", "" if text is None else str(text))


def model_label(report: Report) -> str:
    """The model part of the classname: the Hub id or alias, dots and slashes made safe.

    CI dashboards split classnames at dots into package and class, so `Qwen/Qwen3.8-27B` becomes
    `Qwen_Qwen3_8-27B`; a local folder shows as its base name.
    """
    m = report.model
    raw = m.name if m is not None else ""
    if m is not None and m.source == "local":
        raw = os.path.basename(os.path.normpath(m.query or raw))
    if not raw:
        return "environment"
    return re.sub(r"[^A-Za-z0-9_-]+", "_", str(raw)).strip("_") or "model"


def classname(report: Report) -> str:
    return f"kernelcheck.{report.command}.{model_label(report)}"


def properties(report: Report) -> list[tuple[str, str]]:
    """(name, value) pairs describing where the check ran: the facts a reader of a red build needs."""
    props: list[tuple[str, Any]] = [
        ("kernelcheck", __version__),
        ("command", report.command),
        ("verdict", report.verdict),
        ("exit_code", report.exit_code),
        ("mode", report.mode or ""),
    ]
    m = report.model
    if m is not None:
        props += [("model.query", m.query or ""), ("model.id", m.id or ""), ("model.model_type", m.model_type or ""),
                  ("model.source", m.source or "")]
    props += _environment_properties(report.environment)
    props += _step_properties(report.step)
    return [(k, _clean("" if v is None else v)) for k, v in props]


def _environment_properties(env: EnvironmentView | None) -> list[tuple[str, Any]]:
    """The machine's versions, GPUs and kernel packages (empty values for a report without an environment)."""
    t = env.torch if env is not None else None
    props: list[tuple[str, Any]] = [
        ("python", env.python if env else ""),
        ("platform", env.platform if env else ""),
        ("torch", (t.version if t else None) or "absent"),
        ("torch.cuda", (t.cuda or "none (CPU build)") if t else ""),
        ("torch.cxx11abi", t.cxx11abi if t else ""),
        ("triton", (env.triton if env else None) or "absent"),
        ("transformers", (env.transformers if env else None) or "absent"),
        ("kernels", (env.kernels if env else None) or "absent"),
        ("gpus", ", ".join(f"{g.name} ({g.capability.sm})" for g in env.gpus) if env and env.gpus else "none"),
        ("gpu_source", env.gpu_source if env else ""),
        ("driver", (env.driver if env else None) or "none"),
        ("nvcc", (env.nvcc if env else None) or "absent"),
    ]
    for name, st in (env.packages if env else {}).items():
        if not st.installed:
            value = "absent"
        else:
            value = f"{st.distribution or name} {st.version or '?'}"
            if not st.imports:
                value += f" (import fails: {st.error})"
        props.append((f"package.{name}", value))
    return props


def _step_properties(step: StepSection | None) -> list[tuple[str, Any]]:
    """verify --step: the numbers a dashboard plots (per path, the ratios, the projection, the check's cost)."""
    if step is None:
        return []
    out: list[tuple[str, Any]] = [("step.tokens", step.tokens), ("step.shape", step.shape)]
    for path, p in step.paths.items():
        if isinstance(p, Failed):
            out.append((f"step.{path}.error", p.error))
            continue
        out += [(f"step.{path}.{k}", getattr(p, k)) for k in ("step_ms", "tokens_per_s", "kernels_per_step",
                                                               "cpu_ops_per_step", "gpu_busy_fraction",
                                                               "peak_memory_bytes")]
    proj = step.projection
    for path, pj in (("fast", proj.fast), ("reference", proj.reference)):
        if isinstance(pj, PathProjection):
            out.append((f"step.{path}.projected_step_ms", pj.projected_step_ms))
    out += [("step.speedup", step.speedup), ("step.kernel_ratio", step.kernel_ratio),
            ("step.projected_speedup", proj.projected_speedup), ("step.cost_s", step.cost.total_s),
            ("step.triton_cache", step.cost.triton_cache.state)]
    return [(k, v) for k, v in out if v is not None]


def _finding_lines(fd: Finding) -> list[str]:
    out = [f"finding [{fd.id}] ({fd.severity}): {fd.message}"]
    if fd.fix:
        out.append(f"  fix: {fd.fix}")
    if fd.reference:
        out.append(f"  ref: {fd.reference}")
    return out


def _evidence_value(v: Any) -> str:
    """Scalars as they are, lists of names comma-separated, nested data as compact JSON."""
    if isinstance(v, (list, tuple)):
        if not v:
            return "(none)"
        if all(isinstance(x, (str, int, float, bool)) for x in v):
            return ", ".join(map(str, v))
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str, separators=(", ", ": "))
    return str(v)


def _function_text(fs: FunctionStatus, tied: list[Finding]) -> str:
    lines = [f"status: {fs.status}", f"package: {fs.package}", f"implementation: {fs.implementation}"]
    if fs.phase:
        lines.append(f"phase: {fs.phase}")
    if fs.reason:
        lines.append(f"why: {fs.reason}")
    if fs.fix:
        lines.append(f"fix: {fs.fix}")
    if fs.evidence:
        lines.append("evidence:")
        for k, v in fs.evidence.items():
            lines.append(f"  {k}: {_evidence_value(v)}")
    for fd in tied:
        lines.extend(_finding_lines(fd))
    return "\n".join(lines)


def _failure(fs: FunctionStatus, tied: list[Finding]) -> tuple[str, str] | None:
    """(type, message) when the function makes the verdict non-ready, else None.

    The worst of the function's own status and the findings that name it: the same rule
    Report.verdict applies, so the failures in the file match the exit code.
    """
    own: str | None = None if fs.status == Status.FAST else (
        Severity.BROKEN if fs.status == Status.BROKEN else Severity.FALLBACK)
    kind, worst = own, None
    for fd in tied:
        if kind is None or SEVERITY_RANK[fd.severity] > SEVERITY_RANK[kind]:
            kind, worst = fd.severity, fd
    if kind is None:
        return None
    ftype: str
    if worst is None:
        msg, ftype = f"{fs.status}: {fs.reason or fs.implementation}", fs.status
    else:
        msg, ftype = f"{worst.severity} [{worst.id}]: {worst.message}", worst.severity
    fix = worst.fix if worst is not None and worst.fix else fs.fix
    if fix:
        msg += f" | fix: {fix}"
    return ftype, msg


def _tie_findings(report: Report) -> tuple[dict[str, list[Finding]], list[Finding]]:
    """Split the failing findings into those tied to used functions (per name) and the loose rest."""
    used_names = {fs.name for fs in report.functions if fs.used}
    tied: dict[str, list[Finding]] = {fs.name: [] for fs in report.functions}
    loose: list[Finding] = []
    for fd in report.findings:
        if fd.severity not in _FAILING:
            continue
        hits = [n for n in fd.functions if n in used_names]
        if hits:
            for n in hits:
                tied[n].append(fd)
        else:
            loose.append(fd)
    return tied, loose


def build(report: Report, timestamp: _dt.datetime | None = None) -> ET.Element:
    """The `<testsuites>` element for `report` (see the module docstring for the mapping)."""
    cls = classname(report)
    tied, loose = _tie_findings(report)

    cases: list[ET.Element] = []
    failures = skipped = 0
    for fs in report.functions:
        case = ET.Element("testcase", {"classname": cls, "name": _clean(fs.name), "time": "0"})
        text = _function_text(fs, tied[fs.name])
        if not fs.used:
            ET.SubElement(case, "skipped", {"message": _clean(
                f"not used in mode {report.mode or '-'}: {fs.reason or fs.status}")}).text = _clean(text)
            skipped += 1
        else:
            failure = _failure(fs, tied[fs.name])
            if failure is None:
                ET.SubElement(case, "system-out").text = _clean(text)
            else:
                ET.SubElement(case, "failure", {"type": failure[0], "message": _clean(failure[1])}).text = \
                    _clean(text)
                failures += 1
        cases.append(case)
    for fd in loose:
        case = ET.Element("testcase", {"classname": cls, "name": _clean(f"finding:{fd.id}"), "time": "0"})
        msg = f"{fd.severity}: {fd.message}" + (f" | fix: {fd.fix}" if fd.fix else "")
        ET.SubElement(case, "failure", {"type": fd.severity, "message": _clean(msg)}).text = \
            _clean("\n".join(_finding_lines(fd)))
        failures += 1
        cases.append(case)
    if not cases:
        # An environment-only run (no --model): one case, so dashboards show that the check ran.
        case = ET.Element("testcase", {"classname": cls, "name": report.command, "time": "0"})
        ET.SubElement(case, "system-out").text = f"verdict: {report.verdict}"
        cases.append(case)

    ts = (timestamp or _dt.datetime.now(_dt.UTC)).replace(microsecond=0)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", {"name": "kernelcheck", **counts, "time": "0"})
    suite = ET.SubElement(root, "testsuite", {
        "name": cls, **counts, "skipped": str(skipped), "time": "0",
        "timestamp": ts.strftime("%Y-%m-%dT%H:%M:%S"), "hostname": _clean(socket.gethostname()),
    })
    props = ET.SubElement(suite, "properties")
    for name, value in properties(report):
        ET.SubElement(props, "property", {"name": name, "value": value})
    suite.extend(cases)
    ET.SubElement(suite, "system-out").text = _clean(render_text(report))
    return root


def build_error(command: str, message: str, exit_code: int, model: str | None = None) -> ET.Element:
    """A one-case file for a run that ended before a report existed (bad input: exit 2; internal: 1).

    CI then shows the reason instead of "no test report found".
    """
    label = re.sub(r"[^A-Za-z0-9_-]+", "_", model).strip("_") if model else "environment"
    cls = f"kernelcheck.{command}.{label or 'model'}"
    counts = {"tests": "1", "failures": "0", "errors": "1"}
    root = ET.Element("testsuites", {"name": "kernelcheck", **counts, "time": "0"})
    suite = ET.SubElement(root, "testsuite", {
        "name": cls, **counts, "skipped": "0", "time": "0",
        "timestamp": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        "hostname": _clean(socket.gethostname()),
    })
    props = ET.SubElement(suite, "properties")
    for name, value in (("kernelcheck", __version__), ("command", command), ("exit_code", str(exit_code))):
        ET.SubElement(props, "property", {"name": name, "value": value})
    case = ET.SubElement(suite, "testcase", {"classname": cls, "name": command, "time": "0"})
    kind = "bad-input" if exit_code == EXIT_USAGE else "internal-error"
    ET.SubElement(case, "error", {"type": kind, "message": _clean(message)}).text = _clean(message)
    return root


def _write_tree(root: ET.Element, path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    ET.indent(root)
    data = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    try:
        if p.parent and not p.parent.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_bytes(data + b"\n")
        os.replace(tmp, p)
    except OSError as exc:
        raise BadInput(f"cannot write the JUnit file {str(p)!r}: {exc.strerror or exc}. Pass --junit a path in a "
                       "writable folder (it is created if missing).") from None
    return p


def write(report: Report, path: str | os.PathLike[str]) -> Path:
    """Write `report` as JUnit XML to `path` (parent folders are created). Raises BadInput if unwritable."""
    return _write_tree(build(report), path)


def write_error(command: str, path: str | os.PathLike[str], message: str, exit_code: int,
                model: str | None = None) -> Path:
    """Write the one-case error file for a run that produced no report."""
    return _write_tree(build_error(command, message, exit_code, model), path)
