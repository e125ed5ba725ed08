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


class Ticker:
    """The progress of one step, started and stopped by hand (`working` is the usual form). `stop()` joins the
    thread, so nothing of it is left when the caller forks (doctor forks its import children after torch's import)."""

    def __init__(self, label: str, *, stream: TextIO | None = None, delay: float = 2.0, every: float = 30.0,
                 tick: float = 0.5, detail: Callable[[], str] | None = None) -> None:
        self.label, self.out, self.delay, self.every, self.tick, self.detail = \
            label, stream or sys.stderr, delay, every, tick, detail
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._shown = False
        self._t0 = time.monotonic()
        self._thread: threading.Thread | None = None

    def start(self) -> Ticker:
        if enabled():
            self._thread = threading.Thread(target=self._run, name="kernelcheck-progress", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        wait = self.delay if self.tty else self.every
        while not self._stop.wait(wait):
            secs = int(time.monotonic() - self._t0)
            extra = f"; {self.detail()}" if self.detail is not None else ""
            try:
                if self.tty:
                    self.out.write(f"\r\033[K{self.label} ... {secs} s{extra}")
                else:
                    self.out.write(f"kernelcheck: {self.label} (still working, {secs} s{extra})\n")
                self.out.flush()
            except (OSError, ValueError):
                return
            self._shown = True
            wait = self.tick if self.tty else self.every

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self.tty and self._shown:
            try:
                self.out.write("\r\033[K")
                self.out.flush()
            except (OSError, ValueError):
                pass


@contextmanager
def working(label: str, *, stream: TextIO | None = None, delay: float = 2.0, every: float = 30.0,
            tick: float = 0.5, detail: Callable[[], str] | None = None) -> Iterator[None]:
    """Show that `label` is still running while the block runs (see the module text); `detail()` adds what is
    known so far (verify: the Triton cache entries compiled)."""
    ticker = Ticker(label, stream=stream, delay=delay, every=every, tick=tick, detail=detail).start()
    try:
        yield
    finally:
        ticker.stop()
