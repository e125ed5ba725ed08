"""One bounded child process: its own process group (ended whole, SIGKILL, on a timeout, an interruption or
kernelcheck's own death: lifeline.preexec), its output kept in a file and read back bounded (the last `tail`
bytes), never in a pipe a hostile child can fill faster than it is read.

`run(cmd, timeout)` returns a `Finished`: the exit code (None when the time ran out and the group was ended), the
seconds it took, and the tail of its output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kernelcheck.core import lifeline

TAIL = 4000  # bytes of the child's output kept for a message


@dataclass(frozen=True)
class Finished:
    code: int | None  # None: ran past its time and was ended
    seconds: float
    output: str  # the last TAIL bytes of stdout+stderr, decoded with replacement


def end_group(pid: int) -> None:
    """SIGKILL to the child's whole process group (it leads its own: start_new_session), then reap nothing:
    the caller's wait does."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run(cmd: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        tail: int = TAIL) -> Finished:
    """Run `cmd` to its end or `timeout` seconds; a KeyboardInterrupt (Ctrl-C, SIGTERM routed) ends its group
    first and is raised again."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=None if env is None else dict(env), cwd=cwd, start_new_session=True,
                                preexec_fn=lifeline.preexec())
        code: int | None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            end_group(proc.pid)
            proc.wait()
            code = None
        except BaseException:
            end_group(proc.pid)
            proc.wait()
            raise
        end_group(proc.pid)  # whatever it left running in its group (a grandchild) ends with it
        size = log.seek(0, os.SEEK_END)
        log.seek(max(0, size - tail))
        out = log.read(tail).decode("utf-8", errors="replace")
    return Finished(code, time.monotonic() - started, out)
