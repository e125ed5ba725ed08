"""A command's result (`Outcome`): its report, its verdict, and the exit code that verdict means.

Every command's `run` returns one (kernelcheck/commands/), and so does install/command.py's: the exit code is never
carried beside the report, it follows from the verdict (core/status.py EXIT_CODE), and a report's JSON prints the
Outcome's verdict and exit code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kernelcheck.core.status import EXIT_CODE, Verdict

R = TypeVar("R")


class Judged(Protocol):
    """A report that carries its verdict (`Report`: decided in core/decide.py)."""

    @property
    def verdict(self) -> str: ...


J = TypeVar("J", bound=Judged)


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """A command's result: its report (a `Report`, or the command's own value: padding's measurement, the fleet
    table, the forecast), its verdict, and the exit code that verdict means."""

    report: R
    verdict: Verdict

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[self.verdict]


def reported(report: J) -> Outcome[J]:
    """The Outcome of a command whose verdict is its report's (doctor, verify, hub, trace)."""
    return Outcome(report, Verdict(report.verdict))
