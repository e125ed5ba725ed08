"""`--all-ranks` and `--timeout` for doctor and verify: each rank checks itself, rank 0 shows the fleet.

The decorator sits between `guarded` and the command: without --all-ranks the command runs as
before; with it, the command's report (or its error) is handed over instead of printed, gathered
to rank 0 (kernelcheck.fleet.gather), rank 0 prints the fleet table, and every rank returns the
fleet's exit code.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kernelcheck import schemas
from kernelcheck.core.errors import KernelcheckError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
ALL_RANKS_HELP = ("Under torchrun, srun or an indexed Kubernetes Job: every rank checks itself, rank 0 prints the "
                  "fleet table and the differences, every rank exits with the worst rank's code (docs/fleet.md).")
TIMEOUT_HELP = ("With --all-ranks: seconds a rank waits for the others once its own check is done; a rank that "
                "never joins or dies is named and the gate exits 4.")


class FleetError(KernelcheckError):
    exit_code = 4


def _rank_junit(path: str, rank: int) -> str:
    p = Path(path)
    return str(p.with_name(f"{p.stem}.rank{rank}{p.suffix}"))


def _own_record(command: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """This rank's report as JSON, or the error record a failed check leaves (the fleet still hears of it)."""
    from kernelcheck.fleet import handoff

    with handoff.collecting() as box:
        try:
            fn(*args, **kwargs)
        except KernelcheckError as exc:
            return {"schema": schemas.ERROR, "command": command, "verdict": None, "exit_code": exc.exit_code,
                    "error": exc.message}
        except (KeyboardInterrupt, click.exceptions.Exit, click.ClickException):
            raise
        except Exception as exc:  # noqa: BLE001 - the documented exit 1, reported to the fleet
            log.info("check failed", exc_info=True)
            return {"schema": schemas.ERROR, "command": command, "verdict": None, "exit_code": 1,
                    "error": f"internal error ({type(exc).__name__}: {exc})"}
    if not box:
        return {"schema": schemas.ERROR, "command": command, "verdict": None, "exit_code": 1,
                "error": "the check produced no report"}
    out: dict[str, Any] = box[0].to_json()
    return out


def run_all_ranks(command: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  timeout: float) -> int:
    from kernelcheck.fleet import gather, ranks, summary, table

    info = ranks.discover(os.environ)
    if kwargs.get("junit") and info.world_size > 1:
        kwargs["junit"] = _rank_junit(kwargs["junit"], info.rank)
    record = summary.summarise(_own_record(command, fn, args, kwargs), rank=info.rank, host=info.host)
    try:
        outcome = gather.gate(record, info, timeout, table.fleet_code)
    except gather.FleetFailure as exc:
        raise FleetError(str(exc)) from None
    if info.rank == 0:
        if kwargs.get("as_json"):
            import json

            click.echo(json.dumps(table.to_json(command, outcome.records, outcome.missing, outcome.exit_code,
                                                outcome.message, {"timings": outcome.timings}), indent=2, default=str))
        else:
            click.echo(table.render_text(command, outcome.records, outcome.missing, outcome.exit_code,
                                         outcome.message))
    elif outcome.message:
        click.echo(f"kernelcheck {command} --all-ranks: {outcome.message}", err=True)
    if info.rank == 0 and outcome.message:
        click.echo(f"kernelcheck {command} --all-ranks: {outcome.message}", err=True)
    outcome.release()
    return outcome.exit_code


def all_ranks_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add --all-ranks/--timeout to a command whose report goes through cli.main._finish."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, all_ranks: bool = False, timeout: float = DEFAULT_TIMEOUT_S, **kwargs: Any) -> Any:
            if not all_ranks:
                return fn(*args, **kwargs)
            return run_all_ranks(command, fn, args, kwargs, timeout)

        wrapper = click.option("--timeout", type=click.FloatRange(min=1.0), default=DEFAULT_TIMEOUT_S,
                               show_default=True, help=TIMEOUT_HELP)(wrapper)
        return click.option("--all-ranks", "all_ranks", is_flag=True, help=ALL_RANKS_HELP)(wrapper)

    return deco
