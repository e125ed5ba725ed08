"""SIGINT and SIGTERM end every command the same way: the code on the way out runs (an install rolls back
and ends the process groups it started), one line says what was left, and the exit code is 128 + the
signal: 130 for SIGINT (Ctrl-C), 143 for SIGTERM (`kill`, `docker stop`).

Python turns SIGINT into KeyboardInterrupt; SIGTERM would end the process at once, leaving pip, a build's
compilers or the doctor after install running. Here both raise `Interrupted` in the main thread instead.

A SIGINT is acted on even when the process started with it ignored: a shell without job control (a script, CI)
starts every `cmd &` with SIGINT ignored, so `kernelcheck trace t.json & ... kill -INT $!` (or a CI runner's
cancel, SIGINT to the process group) was lost and the run went on to its verdict. Python keeps
an ignored SIGINT ignored and so did kernelcheck; a check is never worth finishing against an explicit
interrupt. A SIGTERM set to be ignored (`trap '' TERM`, which only a user writes) stays ignored.

The routing itself (`route`, `routed`) is core/signals.py's, so verify's step worker routes signals without
importing the CLI; this module says what an interruption left and exits.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from typing import NoReturn

import click

from kernelcheck import schemas
from kernelcheck.core.errors import Interrupted


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
