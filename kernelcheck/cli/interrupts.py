"""SIGINT and SIGTERM end every command the same way: the code on the way out runs (an install rolls back
and ends the process groups it started), one line says what was left, and the exit code is 128 + the
signal: 130 for SIGINT (Ctrl-C), 143 for SIGTERM (`kill`, `docker stop`).

Python turns SIGINT into KeyboardInterrupt; SIGTERM would end the process at once, leaving pip, a build's
compilers or the doctor after install running. Here both raise `Interrupted` in the main thread instead.

A SIGINT is acted on even when the process started with it ignored: a shell without job control (a script, CI)
starts every `cmd &` with SIGINT ignored, so `kernelcheck trace t.json & ... kill -INT $!` (or a CI runner's
cancel, SIGINT to the process group) was lost and the run went on to its verdict (issue 26 item 8). Python keeps
an ignored SIGINT ignored and so did kernelcheck; a check is never worth finishing against an explicit
interrupt. A SIGTERM set to be ignored (`trap '' TERM`, which only a user writes) stays ignored.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

import click

from kernelcheck import schemas
from kernelcheck.core.errors import Interrupted


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def install() -> dict[int, object]:
    """Route SIGINT and SIGTERM to `Interrupted` (main thread only); returns the handlers replaced."""
    old: dict[int, object] = {}
    for sig, taken in ((signal.SIGINT, (signal.default_int_handler, signal.SIG_IGN)),
                       (signal.SIGTERM, (signal.SIG_DFL,))):
        try:
            current = signal.getsignal(sig)
            if current in taken:
                signal.signal(sig, _raise)
                old[sig] = current
        except ValueError:  # not the main thread: leave signals to the main one
            break
    return old


@contextlib.contextmanager
def routed() -> Iterator[None]:
    old = install()
    try:
        yield
    finally:
        for sig, handler in old.items():
            with contextlib.suppress(ValueError, TypeError):
                if signal.getsignal(sig) is _raise:  # a handler the command set meanwhile stays (cli/fleet.py)
                    signal.signal(sig, handler)  # type: ignore[arg-type]


def report(command: str, exc: BaseException, as_json: bool) -> NoReturn:
    """Say what the interruption left and exit 128 + the signal; a second signal no longer cuts this short."""
    intr = Interrupted.of(exc)
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):
            signal.signal(sig, signal.SIG_IGN)
    message = (f"interrupted by {intr.signal_name} (exit {intr.exit_code}): "
               + (intr.detail or "stopped before a verdict."))
    with contextlib.suppress(OSError, ValueError):
        if as_json:
            click.echo(json.dumps({"schema": schemas.ERROR, "command": command, "verdict": None,
                                   "exit_code": intr.exit_code, "error": message}, indent=2))
        click.echo(f"kernelcheck{' ' + command if command else ''}: {message}", err=True)
    sys.exit(intr.exit_code)
