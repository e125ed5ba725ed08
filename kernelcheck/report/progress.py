"""Progress for work that may take more than ~2 s, on stderr (stdout stays the report or the JSON).

One mechanism for every long step (doctor's import proofs, install's downloads, verify's first pass):

    with working("doctor: proving which kernel packages import"):
        ...

- stderr a TTY: after `delay` seconds, one line `label ... 12 s` rewritten in place every half second, erased when
  the step ends (nothing is left behind for a fast step);
- stderr not a TTY (CI logs): one plain line `kernelcheck: label (still working, 30 s)` every `every` seconds, and
  nothing for a step shorter than that;
- --quiet or KERNELCHECK_PROGRESS=0: nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from kernelcheck.core import settings

_STATE = {"quiet": False}


def set_quiet(quiet: bool) -> None:
    _STATE["quiet"] = quiet


def enabled() -> bool:
    return not _STATE["quiet"] and (settings.variable("KERNELCHECK_PROGRESS") or "1").strip().lower() not in (
        "0", "off", "no", "false", "n")


@contextmanager
def working(label: str, *, stream: TextIO | None = None, delay: float = 2.0, every: float = 30.0,
            tick: float = 0.5, detail: Callable[[], str] | None = None) -> Iterator[None]:
    """Show that `label` is still running while the block runs (see the module text); `detail()` adds what is
    known so far (verify: the Triton cache entries compiled)."""
    out = stream or sys.stderr
    if not enabled():
        yield
        return
    tty = bool(getattr(out, "isatty", lambda: False)())
    stop = threading.Event()
    shown = threading.Event()
    t0 = time.monotonic()

    def run() -> None:
        wait = delay if tty else every
        while not stop.wait(wait):
            secs = int(time.monotonic() - t0)
            extra = f"; {detail()}" if detail is not None else ""
            try:
                if tty:
                    out.write(f"\r\033[K{label} ... {secs} s{extra}")
                else:
                    out.write(f"kernelcheck: {label} (still working, {secs} s{extra})\n")
                out.flush()
            except (OSError, ValueError):
                return
            shown.set()
            wait = tick if tty else every

    thread = threading.Thread(target=run, name="kernelcheck-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if tty and shown.is_set():
            try:
                out.write("\r\033[K")
                out.flush()
            except (OSError, ValueError):
                pass
