"""Holding SIGINT/SIGTERM back for a moment: blocks that must not be cut in half by an interruption.

- An install's rollback and commit (install/apply.py): a second Ctrl-C must not leave half a rollback.
- `import torch` and the kernel packages' imports (core/environment.py): torch's C code imports numpy and
  *clears* any error that import raises, KeyboardInterrupt included ("Failed to initialize NumPy"), so a
  Ctrl-C that lands there is lost and the install goes on (seen by tests/test_install_signals.py). Held
  back, it is raised as soon as the import is done; a second signal interrupts the import at once.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

from kernelcheck.core.errors import Interrupted

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held(*, reraise: bool = True, second_interrupts: bool = False) -> Iterator[list[int]]:
    """SIGINT/SIGTERM that arrive in the block are noted (the list yielded) and, with `reraise`, raised as
    Interrupted when it ends. With `second_interrupts`, a second signal raises at once. Only the main thread
    can hold signals; elsewhere the block runs as is. Signals set to be ignored stay ignored."""
    came: list[int] = []
    old: dict[int, object] = {}

    def note(signum: int, frame: FrameType | None) -> None:
        came.append(signum)
        if second_interrupts and len(came) > 1:
            raise Interrupted(came[0])

    try:
        for sig in _SIGNALS:
            current = signal.getsignal(sig)
            if current is not signal.SIG_IGN:
                old[sig] = current
                signal.signal(sig, note)
    except ValueError:  # not the main thread
        pass
    try:
        yield came
    except Exception as exc:
        # the block failed (an import that raises ImportError) after a signal came: the signal wins, else it
        # would be lost with the block's error (a broken fla-core under a `kill` went on installing)
        if came and reraise:
            raise Interrupted(came[0]) from exc
        raise
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
    if came and reraise:
        raise Interrupted(came[0])
