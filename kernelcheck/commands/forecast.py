"""`doctor --upgrade SPEC...`: the verdict of the environment pip would produce, forecast in a throwaway overlay,
assembled once (forecast/command.py runs doctor before and after in fresh processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome

if TYPE_CHECKING:
    from kernelcheck.forecast.command import Forecast


@dataclass(frozen=True)
class Request:
    """The upgrade's specs, doctor's own options as arguments for its runs before and after (`--model M --mode
    infer`), the wheelhouse and --offline to resolve with, and --if-worse (exit non-zero only when worse)."""

    specs: tuple[str, ...]
    doctor_args: tuple[str, ...] = ()
    wheelhouse: str | None = None
    offline: bool = False
    if_worse: bool = False


def check(req: Request) -> None:
    """Usage errors, found before pip or doctor runs."""
    if req.offline and not req.wheelhouse:
        raise BadInput("--offline with --upgrade resolves from a wheelhouse only: pass --wheelhouse DIR too.")
    from kernelcheck.forecast.resolve import pip_args

    pip_args(list(req.specs))  # the specs (-r FILE) are checked before the network policy they would run under


def run(req: Request, ctx: Context) -> Outcome[Forecast]:
    """The forecast; its exit code is the after-verdict's (with --if-worse: 0 unless worse than now)."""
    from kernelcheck.forecast import command
    from kernelcheck.forecast.resolve import Index

    check(req)
    fc = command.run(list(req.specs), list(req.doctor_args),
                     Index.of(req.wheelhouse, req.offline, ctx.settings.offline), if_worse=req.if_worse, m=ctx.matrix)
    return Outcome.of_exit(fc, fc.exit_code)
