"""Third-party noise of a live run: kept out of the user's face, shown with --verbose, advice reconciled.

The profiler's C++ side prints `USDT:... profiler_start` straight to file descriptor 2, and transformers
logs "`chunk_gated_delta_rule` is falling back ... install `flash-linear-attention`". kernelcheck runs
the live work with fd 1/2 redirected to a log (or in a worker process whose output goes to one), and
turns what the log advises into a finding that says what kernelcheck installs instead where the two
names differ (transformers names the full flash-linear-attention distribution; only fla-core, its ops
half, is needed, and flash-linear-attention pins transformers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kernelcheck.core import matrix
from kernelcheck.core.status import Finding, Severity

log = logging.getLogger(__name__)

_INSTALL_RX = re.compile(r"install `([A-Za-z0-9_.\-]+)`")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def advice_findings(text: str, m: matrix.Matrix) -> list[Finding]:
    """One info finding per distribution the captured output tells the user to install under another name."""
    packages = m.packages
    told = set(_INSTALL_RX.findall(text))
    out: list[Finding] = []
    for key, p in packages.items():
        names = {key, p.title}
        said = sorted(n for n in told if n in names)
        if said and _norm(said[0]) != _norm(p.install_distribution):
            out.append(Finding(
                f"advice-{key.replace('_', '-')}", Severity.INFO,
                f"transformers' own warning (shown with --verbose) says to install `{said[0]}`; the package "
                f"it needs is `{p.install_distribution}` (what kernelcheck installs: the kernels alone, without "
                "pins on transformers). Both names mean the same kernels.",
                f"kernelcheck install --model M  (or pip install {p.install_distribution})"))
    return out


def summary(text: str) -> str:
    """A one-line count of what was captured, e.g. '2 transformers warnings, 4 profiler lines'."""
    lines = [x for x in text.splitlines() if x.strip()]
    usdt = sum(1 for x in lines if x.startswith("USDT") or "profiler_st" in x)
    tf = sum(1 for x in lines if x.startswith("[transformers]") or "transformers" in x.split(":")[0])
    rest = len(lines) - usdt - tf
    return f"{tf} transformers line(s), {usdt} profiler line(s), {rest} other line(s)"


@contextlib.contextmanager
def captured(verbose: bool) -> Iterator[list[str]]:
    """Redirect fd 1 and 2 (C++ and Python writes) into a temporary log while the block runs; the log's
    text lands in the yielded list afterwards. With `verbose` nothing is redirected."""
    box: list[str] = []
    if verbose:
        yield box
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield box
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            box.append(tmp.read().decode("utf-8", "replace"))


class _ListHandler(logging.Handler):
    def __init__(self, box: list[str]):
        super().__init__(logging.WARNING)
        self.box = box

    def emit(self, record: logging.LogRecord) -> None:
        self.box.append(f"[transformers] {record.getMessage()}")


@contextlib.contextmanager
def captured_logging(verbose: bool) -> Iterator[list[str]]:
    """Keep transformers' log lines ("... is falling back ... install `flash-linear-attention`") and Python
    warnings out of the terminal while the block runs, as lines in the yielded list. Unlike `captured` the
    file descriptors stay as they are, so kernelcheck's own progress lines keep reaching stderr."""
    import warnings

    box: list[str] = []
    if verbose:
        yield box
        return
    logger = logging.getLogger("transformers")
    saved = logger.handlers[:], logger.propagate
    logger.handlers = [_ListHandler(box)]
    logger.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield box
    finally:
        logger.handlers, logger.propagate = saved
        box.extend(f"{w.category.__name__}: {w.message}" for w in caught)


def read_log(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        log.info("worker log %s not readable", path)
        return ""
