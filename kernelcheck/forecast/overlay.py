"""A throwaway overlay: the changed distributions `pip install --no-deps --target` into a temporary folder,
put first on PYTHONPATH for a fresh process, removed afterwards, also when interrupted (SIGINT/SIGTERM stop
pip's process group first, then the folder goes). The live environment is never written to."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from kernelcheck.core.errors import BadInput
from kernelcheck.forecast.resolve import Change, Index


def _say(text: str) -> None:
    sys.stderr.write(f"kernelcheck: {text}\n")
    sys.stderr.flush()


def _stop(proc: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _install(folder: Path, changes: Sequence[Change], index: Index, timeout: float) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
           "--no-compile", "--target", str(folder), *index.args(), *(c.spec for c in changes)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise BadInput(f"installing the forecast overlay took over {timeout:.0f} s; nothing was changed.") from None
    except BaseException:  # SIGINT/SIGTERM (routed as KeyboardInterrupt): pip goes first, then the folder
        _stop(proc)
        raise
    if proc.returncode != 0:
        tail = " ".join(out.strip().splitlines()[-3:])[:600]
        raise BadInput(f"pip could not install the forecast overlay ({', '.join(c.spec for c in changes)}): "
                       f"{tail}. Nothing in this environment was changed.")


@contextlib.contextmanager
def overlay(changes: Sequence[Change], index: Index, timeout: float = 1800) -> Iterator[Path]:
    """Yield a folder holding exactly `changes`; it is removed when the block ends, however it ends."""
    folder = Path(tempfile.mkdtemp(prefix="kernelcheck-forecast-"))
    try:
        if changes:
            _say(f"forecast: installing {len(changes)} distribution(s) into a throwaway overlay {folder} "
                 f"(removed after; this environment is not changed): {', '.join(c.spec for c in changes)}")
            _install(folder, changes, index, timeout)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
