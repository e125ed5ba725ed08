"""Progress on stderr (stdout stays the report or the JSON): the one mechanism for long work.

Two forms, one policy (a terminal gets a line redrawn in place; anything else, a CI log, gets no carriage
returns: a plain line every 30 s (KERNELCHECK_PROGRESS_EVERY sets another interval), and for a step that
`announce`s itself (install's downloads and resolves) one plain line when it has run ~2 s; --quiet, --no-progress
or KERNELCHECK_PROGRESS=0 turns both off):
- `working(label)` / `Ticker` for a step of unknown length that may take more than ~2 s (doctor's import
  proofs, install's downloads, verify's first pass): `label ... 12 s`, erased when the step ends; the code inside
  says how far it is with `doing("segment 120 of 256 run alone")` (shown on the next line; a plain assignment,
  cheap enough for every iteration of a loop, and nothing kept but the last text);
- `Progress(total, label)` for a read of known size (a 2 GiB lengths file, a 1 GB trace): a bar and a
  percentage, `update(done)` as it goes.

    with working("doctor: proving which kernel packages import"):
        ...
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
_DOING = {"now": ""}  # what the running step says it is doing (`doing`); only the last text is kept


def doing(text: str) -> None:
    """How far the running step is (`segment 120 of 256 run alone (fwd+bwd)`): the next progress line shows it.
    Only the last text is kept, so a loop of any length may call it every iteration."""
    _DOING["now"] = text


def line_interval(default: float) -> float:
    """Seconds between plain progress lines in a log: KERNELCHECK_PROGRESS_EVERY where set, else `default`."""
    if settings.variable("KERNELCHECK_PROGRESS_EVERY"):
        return settings.seconds("KERNELCHECK_PROGRESS_EVERY")
    return default


def set_quiet(quiet: bool) -> None:
    _STATE["quiet"] = quiet


def enabled() -> bool:
    return not _STATE["quiet"] and settings.is_on(settings.variable("KERNELCHECK_PROGRESS"), True)


class Ticker:
    """The progress of one step, started and stopped by hand (`working` is the usual form). `stop()` joins the
    thread, so nothing of it is left when the caller forks (doctor forks its import children after torch's import)."""

    def __init__(self, label: str, *, stream: TextIO | None = None, delay: float = 2.0, every: float | None = None,
                 tick: float = 0.5, detail: Callable[[], str] | None = None, announce: bool = False) -> None:
        self.every = line_interval(PLAIN_EVERY_S if every is None else every)
        self.delay = min(delay, self.every)  # the first line never later than the interval between lines
        self.label, self.out, self.tick, self.detail = label, stream or sys.stderr, tick, detail
        self.announce = announce  # a log gets a line when the step starts to take time, not only every 30 s
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._shown = False
        self._t0 = time.monotonic()
        self._thread: threading.Thread | None = None

    def start(self) -> Ticker:
        _DOING["now"] = ""
        if enabled():
            self._thread = threading.Thread(target=self._run, name="kernelcheck-progress", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        wait = self.delay if self.tty or self.announce else self.every
        said = self.label if self.label.startswith("kernelcheck") else f"kernelcheck: {self.label}"
        while not self._stop.wait(wait):
            secs = int(time.monotonic() - self._t0)
            now = self.detail() if self.detail is not None else _DOING["now"]
            extra = f"; {now}" if now else ""
            try:
                if self.tty:
                    self.out.write(f"\r\033[K{self.label} ... {secs} s{extra}")
                elif not self._shown and self.announce:  # a log: one line when the step starts to take time
                    self.out.write(f"{said} ...\n")
                else:
                    self.out.write(f"{said} (still working, {secs} s{extra})\n")
                self.out.flush()
            except (OSError, ValueError):
                return
            self._shown = True
            wait = self.tick if self.tty else self.every

    def stop(self) -> None:
        _DOING["now"] = ""
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
def working(label: str, *, stream: TextIO | None = None, delay: float = 2.0, every: float | None = None,
            tick: float = 0.5, detail: Callable[[], str] | None = None, announce: bool = False) -> Iterator[None]:
    """Show that `label` is still running while the block runs (see the module text); `detail()` adds what is
    known so far (verify: the Triton cache entries compiled)."""
    ticker = Ticker(label, stream=stream, delay=delay, every=every, tick=tick, detail=detail,
                    announce=announce).start()
    try:
        yield
    finally:
        ticker.stop()


PLAIN_EVERY_S = 30.0


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f}"


class Progress:
    """`update(done)` as work proceeds (bytes, rows: any count against `total`); `close()` when finished."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, every_s: float | None = None,
                 unit: str = "MB", min_total: int = 0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = max(total, 1)
        self.label = label
        self.unit = unit
        self.every_s = line_interval(PLAIN_EVERY_S if every_s is None else every_s)
        self.on = total >= min_total and enabled()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = self.last_line = time.monotonic()
        self.last_pct = -1
        self.drawn = False

    def _amount(self, done: int) -> str:
        if self.unit == "MB":
            return f"{_mb(done)} / {_mb(self.total)} MB"
        return f"{done:,} / {self.total:,} {self.unit}"

    def update(self, done: int) -> None:
        if not self.on:
            return
        pct = min(100, done * 100 // self.total)
        try:
            if self.tty:
                if pct != self.last_pct:
                    self.last_pct = pct
                    bar = "#" * (pct // 4)
                    self.stream.write(f"\r{self.label} [{bar:<25}] {pct:3d}% ({self._amount(done)})")
                    self.stream.flush()
                    self.drawn = True
                return
            now = time.monotonic()
            if now - self.last_line >= self.every_s and pct < 100:
                self.last_line = now
                self.stream.write(f"{self.label}: {pct}% ({self._amount(done)}, {now - self.started:.0f} s)\n")
                self.stream.flush()
        except (OSError, ValueError):  # stderr closed or gone: progress is not worth an error
            self.on = False

    def close(self) -> None:
        if self.on and self.tty and self.drawn:
            try:
                self.stream.write("\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass
        self.drawn = False
