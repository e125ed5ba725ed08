"""`kernelcheck install` (and `kernelcheck.plan_install()`): plan, and unless --dry-run carry out, assembled once.

The request is install's own, at its one address (install/command.py `Request`: every option, frozen); the plan
and, with --json left out, the doctor block after a real install go to the context's sink as they happen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context

if TYPE_CHECKING:
    from kernelcheck.core.outcome import Outcome
    from kernelcheck.install.command import Request
    from kernelcheck.report.model import Report


def check(req: Request, ctx: Context) -> None:
    """Every usage rule of install, found before anything is probed: --mode, --source, the other flags' values and
    paths (install/command.py `validate`, which the plan reads its targets from) and the model."""
    from kernelcheck.commands import usage
    from kernelcheck.install import command, plan_types

    usage.mode(req.mode)
    usage.choice("--source", req.source, plan_types.SOURCES)
    command.validate(req, ctx.matrix)
    usage.model(req.model, ctx.matrix)


def run(req: Request, ctx: Context) -> Outcome[Report]:
    check(req, ctx)
    from kernelcheck.install import command

    return command.run(req, ctx.sink, ctx.json, m=ctx.matrix)
