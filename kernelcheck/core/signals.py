"""Holding SIGINT/SIGTERM back for a moment: blocks that must not be cut in half by an interruption.

- An install's rollback and commit (install/apply.py): a second Ctrl-C must not leave half a rollback.
- `import torch` and the kernel packages' imports (core/environment.py): torch's C code imports numpy and
  *clears* any error that import raises, KeyboardInterrupt included ("Failed to initialize NumPy"), so a
  Ctrl-C that lands there is lost and the install goes on (seen by tests/integration/test_install_signals.py). Held
  back, it is raised as soon as the import is done; a second signal interrupts the import at once.

And routing them: `route` / `routed` make SIGINT and SIGTERM raise `Interrupted` for a whole command
(cli/interrupts.py says what an interruption left and exits 128 + the signal).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, TypeAlias

from kernelcheck.core.errors import Interrupted

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# What signal.getsignal returns and signal.signal takes back (typeshed's signal._HANDLER).
Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def route() -> dict[int, Handler]:
    """Route SIGINT and SIGTERM to `Interrupted` (main thread only), an ignored SIGINT too (cli/interrupts.py says
    why); returns the handlers replaced."""
    old: dict[int, Handler] = {}
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
    """`route` for the block; the handlers it replaced come back after it."""
    old = route()
    try:
        yield
    finally:
        for sig, handler in old.items():
            with contextlib.suppress(ValueError, TypeError):
                if signal.getsignal(sig) is _raise:  # a handler the command set meanwhile stays (cli/fleet.py)
                    signal.signal(sig, handler)


@contextlib.contextmanager
def held(*, reraise: bool = True, second_interrupts: bool = False) -> Iterator[list[int]]:
    """SIGINT/SIGTERM that arrive in the block are noted (the list yielded) and, with `reraise`, raised as
    Interrupted when it ends. With `second_interrupts`, a second signal raises at once. Only the main thread
    can hold signals; elsewhere the block runs as is. Signals set to be ignored stay ignored."""
    came: list[int] = []
    old: dict[int, Handler] = {}

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
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if came and reraise:  # also when the block raised: the signal wins (an import that failed because
            raise Interrupted(came[0])  # a package is broken must not swallow the SIGTERM that came meanwhile)
