"""`doctor --upgrade SPEC...`: the verdict of the environment pip would produce, forecast in a throwaway overlay,
assembled once (forecast/command.py runs doctor before and after in fresh processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome
from kernelcheck.core.status import Mode

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


def check(req: Request, ctx: Context) -> None:
    """Every usage rule of a forecast, found before pip or doctor runs: each spec as pip reads it (-r FILE
    included), the wheelhouse --offline resolves from, and doctor's own rules for the doctor runs' arguments."""
    from kernelcheck.commands import doctor, usage
    from kernelcheck.forecast.resolve import pip_args

    pip_args(list(req.specs))  # the specs are checked before the network policy they would run under
    if req.offline and not req.wheelhouse:
        raise BadInput("--offline with --upgrade resolves from a wheelhouse only: pass --wheelhouse DIR too.")
    if req.wheelhouse:
        usage.folder(req.wheelhouse, "--wheelhouse", "Give the folder that holds the wheels.")
    given = dict(zip(req.doctor_args, req.doctor_args[1:], strict=False))  # an option's value: the next token
    doctor.check(doctor.Request(model=given.get("--model"), mode=given.get("--mode", Mode.TRAIN),
                                packing=given.get("--packing")), ctx)


def run(req: Request, ctx: Context) -> Outcome[Forecast]:
    """The forecast; its exit code is the after-verdict's (with --if-worse: 0 unless worse than now)."""
    check(req, ctx)
    from kernelcheck.forecast import command
    from kernelcheck.forecast.resolve import Index

    fc = command.run(list(req.specs), list(req.doctor_args),
                     Index.of(req.wheelhouse, req.offline, ctx.settings.offline), if_worse=req.if_worse, m=ctx.matrix)
    return Outcome.of_exit(fc, fc.exit_code)
