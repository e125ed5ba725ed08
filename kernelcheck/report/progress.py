"""Progress on long reads (a 2 GiB lengths file, a 1 GB trace), on stderr so stdout and --json stay clean.

On a terminal: one line redrawn in place (`\\r`) as the percentage changes. Anywhere else (a CI log, a
file, a pipe): no carriage returns and no bar, only a plain line every `every_s` seconds of work, so a log
shows that a long read is moving without filling up. Work shorter than `every_s` prints nothing there.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

PLAIN_EVERY_S = 30.0


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f}"


class Progress:
    """`update(done)` as work proceeds (bytes, rows: any count against `total`); `close()` when finished."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, every_s: float = PLAIN_EVERY_S,
                 unit: str = "MB", min_total: int = 0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = max(total, 1)
        self.label = label
        self.unit = unit
        self.every_s = every_s
        self.on = total >= min_total
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
