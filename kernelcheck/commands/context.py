"""What every command's `run` receives (`Context`) and returns (`Outcome`).

A `Context` is built once per command from `Settings.from_environ()`: the settings, the matrix every decision of the
run reads, the environment probe (on first use, so a usage error is found before any probe) and the sink that
progress lines go to. An `Outcome` holds the command's report, its verdict, and the exit code that follows from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from kernelcheck.core.settings import Settings
from kernelcheck.core.status import EXIT_CODE, Verdict

if TYPE_CHECKING:
    from kernelcheck.core.environment import Environment
    from kernelcheck.core.gpu import Gpu
    from kernelcheck.core.matrix import Matrix
    from kernelcheck.report.model import Report

Sink = Callable[[str], None]
R = TypeVar("R")


def drop(line: str) -> None:
    """The library's sink: progress lines go nowhere."""


class Context:
    """The inputs a command shares with everything it calls, read once: settings, matrix, environment, sink.

    `verbose`: --verbose or KERNELCHECK_VERBOSE=1 (every info finding, third-party output of live runs left
    visible)."""

    def __init__(self, settings: Settings, *, sink: Sink = drop, verbose: bool = False,
                 matrix: Matrix | None = None, environment: Environment | None = None) -> None:
        self.settings = settings
        self.sink = sink
        self.verbose = verbose
        self._matrix = matrix
        self._environment = environment

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, *, sink: Sink = drop,
                     verbose: bool = False) -> Context:
        settings = Settings.from_environ(environ)
        return cls(settings, sink=sink, verbose=verbose or settings.verbose)

    @property
    def matrix(self) -> Matrix:
        """The matrix this run decides on, loaded on first use (the settings' KERNELCHECK_MATRIX_DIR or the shipped
        data)."""
        if self._matrix is None:
            from kernelcheck.core import matrix

            self._matrix = matrix.load()
        return self._matrix

    def environment(self, *, gpu_override: tuple[Gpu, ...] | None = None) -> Environment:
        """This machine, probed on first use (with `gpu_override` standing in for GPUs that are not here)."""
        if self._environment is None:
            from kernelcheck.core import environment

            self._environment = environment.probe(gpu_override=gpu_override)
        return self._environment


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """A command's result: its report (a `Report`, or the command's own value: padding's measurement, the fleet
    table, the forecast), its verdict, and the exit code that verdict means."""

    report: R
    verdict: Verdict

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[self.verdict]


def reported(report: Report) -> Outcome[Report]:
    """The Outcome of a command whose verdict is its report's (doctor, verify, hub, trace)."""
    return Outcome(report, Verdict(report.verdict))
