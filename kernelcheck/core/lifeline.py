"""The processes kernelcheck starts (pip, builds). PIP_NET: the network bound of every pip call that may reach an
index (install, doctor --upgrade).

pip's life tied to kernelcheck's: an install's pip (and a build's) must not outlive the kernelcheck that holds the
install lock, or a SIGKILL of kernelcheck's process group (pip runs in its own session, so the group kill misses it)
leaves pip writing into the environment while the next install, finding the lock free, starts beside it.

Two guards, because either alone has a gap:
- `preexec`: on Linux the child asks the kernel for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG). The
  signal fires when the parent *thread* that started the child ends, so it is set only for a child started from the
  main thread (kernelcheck's installs run there); a child's own children (ninja, nvcc under a build) are not covered.
- the lock's owner: the holder writes `child PGID START` into its lock files for each process group it starts;
  the next install, on taking the lock, ends every group recorded there whose leader is still alive (the same
  process: its start time matches, so a reused pid is never signalled) before it repairs the interrupted install.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO

PR_SET_PDEATHSIG = 1
PIP_NET = ["--retries", "0", "--timeout", "15"]  # every pip call that may reach an index: no 115 s silent waits
_HELD: list[IO[str]] = []  # the lock files this process holds (install/apply.py locked)


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's prctl from the symbols this process has loaded already (dlopen(NULL): no ldconfig run)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def preexec() -> Callable[[], None] | None:
    """A preexec_fn that makes the child die with this process (None where that cannot be asked: not Linux, or not
    the main thread, whose end would kill the child early)."""
    prctl = _prctl()
    if prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()

    def tie() -> None:  # runs in the child, between fork and exec: no allocation-heavy work here
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl: nothing would signal us
            os._exit(1)

    return tie


def parent_for_tie() -> int | None:
    """This process's pid for a child to `tie` itself to (None where a tie cannot be asked: see `preexec`)."""
    if _prctl() is None or threading.current_thread() is not threading.main_thread():
        return None
    return os.getpid()


def tie(parent: int | None) -> None:
    """In a child (forked, or spawned with `parent_for_tie()` passed along): SIGKILL when `parent` dies, and exit
    at once when it has died already (the child was re-parented before the tie)."""
    prctl = _prctl()
    if parent is None or prctl is None:
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def note_child(pid: int) -> None:
    """Record a process group this install started (its leader `pid`) in the lock files it holds."""
    line = f"child {pid} {start_time(pid) or '-'}\n"
    for fh in _HELD:
        with contextlib.suppress(OSError, ValueError):
            fh.write(line)
            fh.flush()


def hold(fh: IO[str]) -> None:
    _HELD.append(fh)


def release(fh: IO[str]) -> None:
    with contextlib.suppress(ValueError):
        _HELD.remove(fh)


def orphans(record: str) -> list[int]:
    """The recorded children of a dead lock owner that still live (same pid, same start time)."""
    out = []
    for line in record.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "child" and parts[1].isdigit():
            pid = int(parts[1])
            if pid != os.getpid() and start_time(pid) == parts[2]:
                out.append(pid)
    return out


def end_orphans(record: str, log: Callable[[str], None], grace: float = 5.0) -> list[int]:
    """End the live process groups a dead owner's lock record names (SIGTERM, then SIGKILL); returns their pids."""
    found = orphans(record)
    for pid in found:
        log(f"an earlier install's process {pid} outlived the kernelcheck that started it; ending it before the "
            "interrupted install is repaired")
        _end(pid, grace)
    return found


def _end(pid: int, grace: float) -> None:
    started = start_time(pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if start_time(pid) != started or _zombie(pid):
                return
            time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def alive(pids: Iterable[int]) -> list[int]:
    return [p for p in pids if start_time(p) is not None and not _zombie(p)]
