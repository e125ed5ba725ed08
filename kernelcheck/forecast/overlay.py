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

from kernelcheck.core import lifeline
from kernelcheck.core.errors import BadInput
from kernelcheck.forecast.resolve import PREFIX, REPORT_PREFIX, Change, Index


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
    scratch = folder / ".pip-tmp"  # pip's own temporary folders inside the overlay: swept with it after a SIGKILL
    scratch.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, TMPDIR=str(scratch)),
                            start_new_session=True, preexec_fn=lifeline.preexec())  # dies with kernelcheck
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise BadInput(f"installing the forecast overlay took over {timeout:.0f} s; nothing was changed.") from None
    except BaseException:  # SIGINT/SIGTERM (routed as KeyboardInterrupt): pip goes first, then the folder
        _stop(proc)
        raise
    shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode != 0:
        tail = " ".join(out.strip().splitlines()[-3:])[:600]
        raise BadInput(f"pip could not install the forecast overlay ({', '.join(c.spec for c in changes)}): "
                       f"{tail}. Nothing in this environment was changed.")




def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep(tmp: Path | None = None) -> list[Path]:
    """Remove the overlays of forecasts whose process is gone (a SIGKILL leaves its folder): each folder is named
    PREFIX + the pid that made it. Returns what was removed."""
    tmp = tmp or Path(tempfile.gettempdir())
    removed = []
    for prefix in (PREFIX, REPORT_PREFIX):
        removed += _sweep(tmp, prefix)
    return removed


def _sweep(tmp: Path, prefix: str) -> list[Path]:
    removed = []
    for folder in tmp.glob(prefix + "*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        if pid.isascii() and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)) \
                and folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@contextlib.contextmanager
def overlay(changes: Sequence[Change], index: Index, timeout: float = 1800) -> Iterator[Path]:
    """Yield a folder holding exactly `changes`; it is removed when the block ends, however it ends (and a
    SIGKILLed forecast's folder by the next forecast's `sweep`)."""
    sweep()
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    try:
        if changes:
            _say(f"forecast: installing {len(changes)} distribution(s) into a throwaway overlay {folder} "
                 f"(removed after; this environment is not changed): {', '.join(c.spec for c in changes)}")
            _install(folder, changes, index, timeout)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
