"""With --json, stdout holds the report and nothing else: while the command runs, file descriptor 1 points at
stderr, so what third-party code prints there (TileLang's logger writes "TileLang begins to compile kernel ..."
to sys.stdout while verify runs the layers on a GPU) lands on stderr instead of before the JSON; the real stdout
comes back just before the report is printed (cli/common.emit, the error and interruption reports)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

_SAVED: list[int] = []  # the real stdout's descriptor while it is reserved


@contextlib.contextmanager
def reserved(active: bool) -> Iterator[None]:
    """Point fd 1 at fd 2 while the block runs (when `active`); put it back after, if release() did not."""
    if not active or _SAVED:
        yield
        return
    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no real descriptors (an embedding host): nothing to reserve
        yield
        return
    _SAVED.append(saved)
    try:
        yield
    finally:
        release()


def release() -> None:
    """The real stdout back on fd 1, for the report (a no-op when nothing is reserved)."""
    if not _SAVED:
        return
    saved = _SAVED.pop()
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # what third-party code wrote so far goes to stderr, where fd 1 points now
    os.dup2(saved, 1)
    os.close(saved)
