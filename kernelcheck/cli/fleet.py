"""`--all-ranks` and `--timeout` for doctor and verify: each rank checks itself, rank 0 shows the fleet.

The decorator sits between `guarded` and the command: without --all-ranks the command runs as
before; with it, the command's report (or its error) is handed over instead of printed, gathered
to rank 0 (kernelcheck.fleet.gather), rank 0 prints the fleet table, and every rank returns the
fleet's exit code.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kernelcheck import schemas
from kernelcheck.core.errors import BadInput, KernelcheckError
from kernelcheck.core.status import EXIT_CODE, EXIT_INTERNAL, EXIT_USAGE, WORDS

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
ALL_RANKS_HELP = ("Under torchrun, srun or an indexed Kubernetes Job: every rank checks itself, rank 0 prints the "
                  "fleet table and the differences, every rank exits with the worst rank's code (docs/fleet.md).")
TIMEOUT_HELP = ("With --all-ranks: seconds a rank waits for the others once its own check is done; a rank that "
                "never joins or dies is named and the gate exits 4.")


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
        except Exception as exc:
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
    from kernelcheck.fleet import ranks

    info = ranks.discover(os.environ)
    if kwargs.get("junit") and info.world_size > 1:
        kwargs["junit"] = _rank_junit(kwargs["junit"], info.rank)
    own = _own_record(command, fn, args, kwargs)
    known = _Known(command, info.rank, info.world_size)
    try:
        return _gate_and_print(command, own, info, timeout, kwargs, known)
    except KeyboardInterrupt as exc:
        if known.code is None:
            raise
        # torchrun SIGTERMs every other worker once one exits non-zero: the verdict was known, so it stands
        from kernelcheck.core.errors import Interrupted

        for sig in (signal.SIGINT, signal.SIGTERM):  # the verdict is out: a further signal changes nothing
            signal.signal(sig, signal.SIG_IGN)
        click.echo(f"kernelcheck {command} --all-ranks: rank {info.rank}: {Interrupted.of(exc).signal_name} after "
                   f"the fleet verdict (a launcher stops the other ranks once one exits non-zero); exiting with the "
                   f"fleet's code {known.code}", err=True)
        return known.code


def run_with_error(command: str, exc: KernelcheckError, kwargs: dict[str, Any]) -> int:
    """A rank whose own arguments or settings are bad (found before its check ran) still joins the fleet and
    reports that error (exit 2: bad input), so rank 0's table says which rank and why, not "never joined"."""
    def fail(**_: Any) -> None:
        raise exc

    rest = {k: v for k, v in kwargs.items() if k not in ("all_ranks", "timeout")}
    timeout = kwargs.get("timeout")
    return run_all_ranks(command, fail, (), rest, DEFAULT_TIMEOUT_S if timeout is None else float(timeout))


_WORDS = {**{EXIT_CODE[v]: w for v, w in WORDS.items()}, EXIT_USAGE: "BAD INPUT", EXIT_INTERNAL: "INTERNAL ERROR"}


class _Known:
    """The fleet's verdict once this rank knows it; `__call__` prints the one line every rank's log carries."""

    def __init__(self, command: str, rank: int, world: int):
        self.command, self.rank, self.world = command, rank, world
        self.code: int | None = None

    def __call__(self, code: int, message: str | None) -> None:
        self.code = code
        where = "rank 0 prints the table" if self.rank else "the table follows on stdout"
        click.echo(f"kernelcheck {self.command} --all-ranks: rank {self.rank}: fleet verdict "
                   f"{_WORDS.get(code, '?')} (exit {code}) for {self.world} ranks; {where}"
                   + (f": {message}" if message else ""), err=True)
        with contextlib.suppress(ValueError):  # main thread only
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
                signal.signal(signal.SIGTERM, self._terminated)

    def _terminated(self, signum: int, frame: Any) -> None:
        """SIGTERM once the verdict is out (torchrun stops the other workers as soon as one exits non-zero, up to
        the interpreter's shutdown): say so and exit with the fleet's code, not 143."""
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.write(f"kernelcheck {self.command} --all-ranks: rank {self.rank}: SIGTERM after the fleet "
                             "verdict (a launcher stops the other ranks once one exits non-zero); exiting with the "
                             f"fleet's code {self.code}\n")
            sys.stderr.flush()
        os._exit(self.code if self.code is not None else 143)


def _gate_and_print(command: str, own: dict[str, Any], info: Any, timeout: float, kwargs: dict[str, Any],
                    known: _Known) -> int:
    from kernelcheck.cli.common import context
    from kernelcheck.commands import fleet

    outcome = fleet.run(fleet.Request(command, own, info, timeout, said=known), context())
    if known.code is None:  # a verdict this rank reached alone (rank 0 never joined, no verdict in time)
        known(outcome.exit_code, outcome.report.table.message)
    if info.rank == 0:
        as_json = bool(kwargs.get("as_json"))
        if as_json:
            from kernelcheck.cli.common import emit

            emit(outcome.report.table.render(as_json=True), is_json=True)  # the real stdout back (cli/stdout_fd.py)
        else:
            click.echo(outcome.report.table.render(as_json=False))
    outcome.report.release()
    # From here on the process only exits: a SIGTERM would otherwise land in the interpreter's shutdown (torch's
    # teardown takes a while), where Python has put the default action back, and end the rank with 143.
    with contextlib.suppress(ValueError):
        if signal.getsignal(signal.SIGTERM) == known._terminated:  # a bound method: equal, never identical
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return outcome.exit_code


def all_ranks_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add --all-ranks/--timeout to a command whose report goes through cli.main._finish."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, all_ranks: bool = False, timeout: float | None = None,
                    early_error: KernelcheckError | None = None, **kwargs: Any) -> Any:
            if early_error is not None:  # this rank's usage error (cli/common.py): joins the fleet as bad input
                return run_with_error(command, early_error, {**kwargs, "timeout": timeout})
            if not all_ranks:
                if timeout is not None:
                    raise BadInput("--timeout only applies with --all-ranks: it bounds how long a rank waits for "
                                   "the others. Drop --timeout, or add --all-ranks; nothing was run.")
                return fn(*args, **kwargs)
            return run_all_ranks(command, fn, args, kwargs, DEFAULT_TIMEOUT_S if timeout is None else timeout)

        wrapper = click.option("--timeout", type=click.FloatRange(min=1.0), default=None,
                               help=TIMEOUT_HELP + f" [default: {DEFAULT_TIMEOUT_S:g}]")(wrapper)
        return click.option("--all-ranks", "all_ranks", is_flag=True, help=ALL_RANKS_HELP)(wrapper)

    return deco
