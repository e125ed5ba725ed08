"""One bounded child process: its own process group (ended whole, SIGKILL, on a timeout, a flood of output, an
interruption or kernelcheck's own death: lifeline.preexec), its output read through a pipe as it comes, keeping
the last `tail` bytes and ending the child once it has written more than `limit` (a hostile or broken tool that
writes forever costs neither memory nor disk).

`run(cmd, timeout)` returns a `Finished`: the exit code (None when it was ended: time ran out or it flooded),
the seconds it took, the tail of its output and why it was ended.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kernelcheck.core import lifeline

TAIL = 4000  # bytes of the child's output kept for a message or a parse
LIMIT = 4 << 20  # bytes a child may write before it is ended


@dataclass(frozen=True)
class Finished:
    code: int | None  # None: ended by kernelcheck (`ended` says why)
    seconds: float
    output: str  # the last TAIL bytes of its output, decoded with replacement
    ended: str = ""  # "timeout" or "flood" when kernelcheck ended it


def end_group(pid: int) -> None:
    """SIGKILL to the child's whole process group (it leads its own: start_new_session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read(fd: int, deadline: float, tail: int, limit: int) -> tuple[bytes, str]:
    """(the last `tail` bytes, "" at EOF, or "timeout" / "flood" when the child is to be ended)."""
    kept, total = b"", 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return kept, "timeout"
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return kept, ""
        total += len(chunk)
        kept = (kept + chunk)[-tail:]
        if total > limit:
            return kept, "flood"


def run(cmd: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        tail: int = TAIL, limit: int = LIMIT, own_group: bool = True, stderr: bool = True) -> Finished:
    """Run `cmd` to its end, `timeout` seconds or `limit` bytes of output; a KeyboardInterrupt (Ctrl-C, SIGTERM
    routed) ends it first and is raised again. OSError (no such program) is raised as it is. `stderr`: kept with
    stdout (else dropped). `own_group` False: the child stays in this process's group (a probe child's compiler:
    the probe's parent ends the whole tree by that group) and only the child itself is ended."""
    started = time.monotonic()
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if stderr else subprocess.DEVNULL,
                            env=None if env is None else dict(env), cwd=cwd, start_new_session=own_group,
                            preexec_fn=lifeline.preexec())

    def end() -> None:
        if own_group:
            end_group(proc.pid)
        else:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    assert proc.stdout is not None
    try:
        kept, ended = _read(proc.stdout.fileno(), started + timeout, tail, limit)
    except BaseException:
        end()
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    if ended:
        end()
    rc = proc.wait()
    if own_group:
        end_group(proc.pid)  # whatever it left running in its group (a grandchild) ends with it
    return Finished(None if ended else rc, time.monotonic() - started, kept.decode("utf-8", errors="replace"), ended)
