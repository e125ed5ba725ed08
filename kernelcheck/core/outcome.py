"""A command's result (`Outcome`): its report, its verdict, and the exit code that verdict means.

Every command's `run` returns one (kernelcheck/commands/), and so does install/command.py's: the exit code is never
carried beside the report, it follows from the verdict (core/status.py EXIT_CODE), and a report's JSON prints the
Outcome's verdict and exit code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kernelcheck.core.status import EXIT_CODE, EXIT_INTERNAL, VERDICT_OF_EXIT, Verdict

R = TypeVar("R")


class Judged(Protocol):
    """A report that carries its verdict (`Report`: decided in core/decide.py)."""

    @property
    def verdict(self) -> str: ...


J = TypeVar("J", bound=Judged)


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """A command's result: its report (a `Report`, or the command's own value: padding's measurement, the fleet
    table, the forecast), its verdict, and the exit code that verdict means.

    A gate over other results (the fleet's ranks, compare's reports) exits with the worst of their codes, which may
    be no verdict's (a rank that stopped on bad input: 2): then `verdict` is None and `error_exit` is that code."""

    report: R
    verdict: Verdict | None
    error_exit: int | None = None

    @property
    def exit_code(self) -> int:
        if self.verdict is not None:
            return EXIT_CODE[self.verdict]
        return EXIT_INTERNAL if self.error_exit is None else self.error_exit

    @classmethod
    def of_exit(cls, report: R, code: int) -> Outcome[R]:
        """A gate's Outcome from the exit code it chose (core/status.py worst_exit)."""
        verdict = VERDICT_OF_EXIT.get(code)
        return cls(report, verdict, None if verdict is not None else code)


def reported(report: J) -> Outcome[J]:
    """The Outcome of a command whose verdict is its report's (doctor, verify, hub, trace)."""
    return Outcome(report, Verdict(report.verdict))
