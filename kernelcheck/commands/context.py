"""What every command's `run` receives: a `Context` (it returns a core/outcome.py `Outcome`).

A `Context` is built once per command from `Settings.from_environ()`: the settings, the matrix every decision of the
run reads, the environment probe (on first use, so a usage error is found before any probe) and the sink that
progress lines go to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kernelcheck.core.settings import Settings

if TYPE_CHECKING:
    from kernelcheck.core.environment import Environment, Gpu
    from kernelcheck.core.matrix import Matrix

Sink = Callable[[str], None]


def drop(line: str) -> None:
    """The library's sink: progress lines go nowhere."""


class Context:
    """The inputs a command shares with everything it calls, read once: settings, matrix, environment, sink.

    `verbose`: --verbose or KERNELCHECK_VERBOSE=1 (every info finding, third-party output of live runs left
    visible); `json`: the output is one JSON object, so what a command would show a person as it runs (install's
    plan before anything runs) is left out and its progress goes to stderr; `progress`: long steps say how far they
    are on stderr (the CLI; report/progress.py), the library's stay silent."""

    def __init__(self, settings: Settings, *, sink: Sink = drop, verbose: bool = False, json: bool = False,
                 progress: bool = False, matrix: Matrix | None = None, environment: Environment | None = None) -> None:
        self.settings = settings
        self.sink = sink
        self.verbose = verbose
        self.json = json
        self.progress = progress
        self._matrix = matrix
        self._environment = environment

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, *, sink: Sink = drop, verbose: bool = False,
                     json: bool = False, progress: bool = False) -> Context:
        settings = Settings.from_environ(environ)
        return cls(settings, sink=sink, verbose=verbose or settings.verbose, json=json, progress=progress)

    @property
    def matrix(self) -> Matrix:
        """The matrix this run decides on, loaded on first use (the settings' KERNELCHECK_MATRIX_DIR or the shipped
        data)."""
        if self._matrix is None:
            from kernelcheck.core import entry

            self._matrix = entry.matrix()
        return self._matrix

    def environment(self, *, gpu_override: tuple[Gpu, ...] | None = None) -> Environment:
        """This machine, probed on first use (with `gpu_override` standing in for GPUs that are not here)."""
        if self._environment is None:
            from kernelcheck.core import environment

            self._environment = environment.probe(m=self.matrix, gpu_override=gpu_override)
        return self._environment
