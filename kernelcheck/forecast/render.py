"""The forecast as text for a person, and as JUnit for CI (a test case per changed function, the verdict and
each orphaned compiled package; a failure where the upgrade makes things worse)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from kernelcheck.core.status import STATUS_RANK
from kernelcheck.forecast.command import Forecast
from kernelcheck.forecast.diff import added
from kernelcheck.report.device_text import device_words

_OUTCOME = {
    "silent-fallback": "its import fails (undefined symbol) and transformers silently runs the torch path",
    "import-error": "its import fails (undefined symbol) and the model's import raises ImportError",
    "unknown": "its import is expected to fail (undefined symbol)",
}


def _rank(status: str | None) -> int:
    """A function's status as core/status.py ranks it; not needed (None) ranks as fast, an unknown word as broken."""
    return 0 if status is None else STATUS_RANK.get(status, 2)


def _v(verdict: str, code: int) -> str:
    return f"{verdict.upper()} (exit {code})"


def render_text(fc: Forecast) -> str:
    d = fc.diff
    lines = [f"forecast for pip install {' '.join(fc.specs)} (computed in a throwaway overlay; nothing here "
             "was changed)"]
    if fc.before.device is not None:
        lines.append(f"  {device_words(fc.before.device)}")
    if not fc.changes:
        lines.append("  pip would change nothing here: the verdict stays as it is.")
    else:
        lines.append("  pip would change: " + ", ".join(f"{c.name} {c.before or '(new)'} -> {c.after}"
                                                         for c in fc.changes))
    trend = "worse" if d.worse else ("better" if d.better else "unchanged")
    lines.append(f"  before: {_v(d.verdict_before, d.exit_before)}   after: {_v(d.verdict_after, d.exit_after)}"
                 f"   ({trend})")
    for f in d.functions:
        line = f"  {f.name}: {f.before_status or 'not needed'} -> {f.after_status or 'not needed'}"
        if f.before_implementation != f.after_implementation and f.after_implementation:
            line += f" (now {f.after_implementation})"
        lines.append(line)
    for x in added(fc.before, fc.after):  # every occurrence: two repositories the Hub failed for are two findings
        lines.append(f"  new finding [{x.severity}] {x.id}: {x.message}")
        if x.fix:
            lines.append(f"    fix: {x.fix}")
    if d.findings_removed:
        lines.append("  findings that go: " + ", ".join(d.findings_removed))
    for t in fc.drift:
        built = f"built for torch {t.built_for}" if t.built_for else "built for another torch"
        lines.append(f"  torch drift: {t.distribution} {t.version} is {built} ({t.evidence}): "
                     f"{_OUTCOME.get(t.outcome, _OUTCOME['unknown'])}.")
        lines.append(f"    fix: {t.fix}")
    lines.append(f"verdict after the upgrade: {d.verdict_after.upper()}"
                 + ("  (--if-worse: not worse than now, exit 0)" if fc.if_worse and not d.worse else ""))
    return "\n".join(lines)


def write_junit(fc: Forecast, path: str) -> None:
    d = fc.diff
    suite = ET.Element("testsuite", name="kernelcheck forecast")
    case = ET.SubElement(suite, "testcase", classname="forecast", name="verdict")
    if d.worse:
        ET.SubElement(case, "failure", message=f"{d.verdict_before} -> {d.verdict_after}").text = render_text(fc)
    for f in d.functions:
        c = ET.SubElement(suite, "testcase", classname="forecast.functions", name=f.name)
        if _rank(f.after_status) > _rank(f.before_status):
            ET.SubElement(c, "failure", message=f"{f.before_status} -> {f.after_status}")
    for t in fc.drift:
        c = ET.SubElement(suite, "testcase", classname="forecast.torch_drift", name=t.distribution)
        ET.SubElement(c, "failure", message=f"built for torch {t.built_for}: {t.outcome}").text = t.fix
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
