"""`doctor/verify --all-ranks`: this rank's record gathered with the others' and the fleet judged, assembled once.

The CLI runs the rank's own check (its report handed over, not printed: fleet/handoff.py), then this gate: the
record summarised, gathered to rank 0 (fleet/gather.py), the fleet's exit code decided there (fleet/table.py
`fleet_code`) and published to every rank. The CLI prints rank 0's table (commands/compare.py `FleetTable`) and
then releases the others (`FleetGate.release`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelcheck.commands.compare import FleetTable
from kernelcheck.commands.context import Context
from kernelcheck.core.errors import FleetError, FleetFailure
from kernelcheck.core.outcome import Outcome

if TYPE_CHECKING:
    from kernelcheck.fleet.gather import Outcome as Gathered
    from kernelcheck.fleet.ranks import RankInfo


@dataclass(frozen=True)
class Request:
    """The gate's inputs: the command (doctor | verify), this rank's report as JSON (or the error record its check
    left), this rank (fleet/ranks.py `discover`), how long to wait for the others, and `said(code, message)`, told
    the fleet's code the moment this rank knows it."""

    command: str
    record: dict[str, Any]
    info: RankInfo
    timeout: float
    said: Callable[[int, str | None], None] | None = None


@dataclass(frozen=True)
class FleetGate:
    """The fleet as this rank knows it: the table (rank 0 holds every record) and the gather, to release."""

    table: FleetTable
    gathered: Gathered

    def release(self) -> None:
        """Rank 0, once it has printed: the other ranks may exit now."""
        self.gathered.release()


def run(req: Request, ctx: Context) -> Outcome[FleetGate]:
    from kernelcheck.fleet import gather, summary, table

    record = summary.summarise(req.record, rank=req.info.rank, host=req.info.host)
    try:
        out = gather.gate(record, req.info, req.timeout, table.fleet_code, said=req.said)
    except FleetFailure as exc:
        raise FleetError(str(exc)) from None
    fleet = FleetTable(req.command, out.records, out.missing, out.exit_code, out.message, {"timings": out.timings})
    return Outcome.of_exit(FleetGate(fleet, out), out.exit_code)
