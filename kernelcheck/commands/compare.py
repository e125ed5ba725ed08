"""`kernelcheck compare REPORT...`: reports written per node read as one fleet, assembled once.

The fleet table (`FleetTable`) is the value `compare` and `--all-ranks` (commands/fleet.py) print: the records, the
missing ranks, the fleet's exit code (the worst rank's: fleet/table.py `fleet_code`) and why the gate failed as a
whole, if it did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelcheck.commands.context import Context
from kernelcheck.core import jsonout
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome

if TYPE_CHECKING:
    from kernelcheck.fleet.gather import Missing
    from kernelcheck.fleet.record import RankRecord


@dataclass(frozen=True)
class Request:
    """compare's options: the report files (or folders of them), and --expect N (fewer is a missing rank)."""

    reports: tuple[str, ...]
    expect: int | None = None


@dataclass(frozen=True)
class FleetTable:
    """One fleet: each report's record, the ranks without one, the fleet's exit code, and its JSON's extra keys."""

    command: str
    records: list[RankRecord]
    missing: dict[int, Missing]
    code: int
    message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        from kernelcheck.fleet import table

        return table.to_json(self.command, self.records, self.missing, self.code, self.message, self.extra or None)

    def render(self, as_json: bool, fmt: str | None = None) -> str:
        """The table, its JSON, or with `fmt` (fleet/blame.py FORMATS) what a cluster's health tooling reads."""
        from kernelcheck.fleet import blame, table

        if fmt is not None:
            return jsonout.dumps(blame.render(fmt, self.records), indent=2, default=str)
        if as_json:
            return jsonout.dumps(self.to_json(), indent=2, default=str)
        return table.render_text(self.command, self.records, self.missing, self.code, self.message)


def check(req: Request) -> None:
    """Every usage rule of compare: at least one report, and --expect a count of ranks."""
    if not req.reports:
        raise BadInput("compare needs at least one REPORT (a file from `kernelcheck doctor/verify --json`, or a "
                       "folder of them).")
    if req.expect is not None and req.expect < 1:
        raise BadInput(f"--expect is the number of nodes or ranks the job has: at least 1, not {req.expect}.")


def run(req: Request, ctx: Context) -> Outcome[FleetTable]:
    check(req)
    from kernelcheck.fleet import compare, table

    records, missing = compare.collect(list(req.reports), req.expect)
    code = table.fleet_code(records, missing)
    return Outcome.of_exit(FleetTable("compare", records, missing, code), code)
