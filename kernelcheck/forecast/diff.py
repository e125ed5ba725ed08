"""Compare two doctor reports (typed: report/model.Report): the verdicts, each function whose status or implementation
changes, and the findings that appear or go. Pure: reports in, a Diff out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernelcheck.core.status import VERDICT_RANK, Finding, FunctionStatus, Status, Verdict
from kernelcheck.report.model import Report


@dataclass(frozen=True)
class FunctionChange:
    name: str
    before_status: Status | None  # None: the report does not list the function (not needed)
    after_status: Status | None
    before_implementation: str | None
    after_implementation: str | None


@dataclass(frozen=True)
class Diff:
    verdict_before: Verdict
    verdict_after: Verdict
    exit_before: int
    exit_after: int
    functions: list[FunctionChange] = field(default_factory=list)
    findings_added: list[str] = field(default_factory=list)
    findings_removed: list[str] = field(default_factory=list)

    @property
    def worse(self) -> bool:
        return VERDICT_RANK.get(self.verdict_after, 2) > VERDICT_RANK.get(self.verdict_before, 2)

    @property
    def better(self) -> bool:
        return VERDICT_RANK.get(self.verdict_after, 2) < VERDICT_RANK.get(self.verdict_before, 2)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["worse"] = self.worse
        out["better"] = self.better
        return out


def _functions(report: Report) -> dict[str, FunctionStatus]:
    return {f.name: f for f in report.functions}


def _path(f: FunctionStatus | None) -> tuple[Status | None, str | None]:
    """What a function runs: its status and implementation (None, None: not listed, so not needed)."""
    return (Status(f.status), f.implementation) if f is not None else (None, None)


def diff(before: Report, after: Report) -> Diff:
    fb, fa = _functions(before), _functions(after)
    changes = []
    for name in sorted(set(fb) | set(fa)):
        (sb, ib), (sa, ia) = _path(fb.get(name)), _path(fa.get(name))
        if (sb, ib) != (sa, ia):
            changes.append(FunctionChange(name, sb, sa, ib, ia))
    return Diff(Verdict(before.verdict), Verdict(after.verdict), before.exit_code, after.exit_code, changes,
                [f.id for f in added(before, after)], [f.id for f in added(after, before)])


def added(before: Report, after: Report) -> list[Finding]:
    """The findings `after` has beyond `before`, one per occurrence: an id `after` holds twice and `before` once
    (hub-not-listable for fla and for mamba-ssm, where only mamba-ssm failed before) adds one, the one whose
    message `before` does not have."""
    out: list[Finding] = []
    for fid in sorted({f.id for f in after.findings}):
        had = [f.message for f in before.findings if f.id == fid]
        now = [f for f in after.findings if f.id == fid]
        fresh = [f for f in now if f.message not in had]
        out.extend((fresh + [f for f in now if f not in fresh])[:max(0, len(now) - len(had))])
    return out
