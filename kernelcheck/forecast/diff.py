"""Compare two doctor reports (JSON objects): the verdicts, each function whose status or implementation
changes, and the findings that appear or go. Pure: reports in, a Diff out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernelcheck.core.status import VERDICT_RANK


@dataclass(frozen=True)
class FunctionChange:
    name: str
    before_status: str | None
    after_status: str | None
    before_implementation: str | None
    after_implementation: str | None


@dataclass(frozen=True)
class Diff:
    verdict_before: str
    verdict_after: str
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


def _functions(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in report.get("functions", []) if isinstance(f, dict) and "name" in f}


def _finding_ids(report: dict[str, Any]) -> set[str]:
    return {f["id"] for f in report.get("findings", []) if isinstance(f, dict) and "id" in f}


def diff(before: dict[str, Any], after: dict[str, Any]) -> Diff:
    fb, fa = _functions(before), _functions(after)
    changes = []
    for name in sorted(set(fb) | set(fa)):
        b, a = fb.get(name, {}), fa.get(name, {})
        if (b.get("status"), b.get("implementation")) != (a.get("status"), a.get("implementation")):
            changes.append(FunctionChange(name, b.get("status"), a.get("status"), b.get("implementation"),
                                          a.get("implementation")))
    ib, ia = _finding_ids(before), _finding_ids(after)
    return Diff(str(before.get("verdict")), str(after.get("verdict")), int(before.get("exit_code", 1)),
                int(after.get("exit_code", 1)), changes, sorted(ia - ib), sorted(ib - ia))
