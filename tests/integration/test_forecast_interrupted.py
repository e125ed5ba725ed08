"""An interrupted forecast (`doctor --upgrade`) leaves nothing in TMPDIR: no pip-* folder of pip's, no
kernelcheck-resolve-* / kernelcheck-forecast-* of its own.

Each pip the forecast runs (the `--dry-run` resolve, then the overlay's `--target` install) gets its TMPDIR inside
the forecast's own folder, named by kernelcheck's pid. A real forecast (transformers 5.24 -> 5.25 from the local
index) is interrupted while each pip runs: SIGINT or SIGTERM to its process group (Ctrl-C, a CI job's stop)
removes everything before it exits; SIGKILL of kernelcheck's pid (the OOM killer's way) ends pip with it, and the
folder it leaves, named by a pid now dead, is removed by the next forecast (`overlay.sweep`, what a forecast runs
first)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelcheck.forecast import overlay
from tests.envs import REPO, site

pytestmark = pytest.mark.integration
NOW = ("transformers==5.24.0", "kernels==0.18.3")
TARGET = ("transformers==5.25.0", "kernels==0.19.1")
PHASES = {"resolve": "--dry-run", "overlay": "--target"}  # the pip argument that tells which pip runs


def _children(pid: int) -> dict[int, str]:
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out[int(stat.parent.name)] = cmd
        except (OSError, IndexError, ValueError):
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# each signal once and each pip at least once (the six pairs cost about 100 s; these three cover every path: the
# group's signal handled during either pip, and the pid killed while the overlay's pip writes)
@pytest.mark.parametrize("phase, how", [("resolve", "SIGINT"), ("overlay", "SIGTERM"), ("overlay", "SIGKILL")])
def test_a_forecast_interrupted_while_pip_works_leaves_nothing_in_tmpdir(tmp_path: Path, phase: str, how: str):
    base = site(*NOW, deps=True)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(base), str(REPO)]), TMPDIR=str(tmp), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b", "--upgrade",
                             *TARGET], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, as a shell job's
    pip = None
    deadline = time.monotonic() + 600
    try:
        while pip is None and time.monotonic() < deadline and proc.poll() is None:
            pip = next((p for p, cmd in _children(proc.pid).items() if " pip install " in cmd
                        and PHASES[phase] in cmd), None)
            time.sleep(0.1)
        assert pip is not None, f"no {phase} pip seen: {proc.communicate(timeout=600)[1][-2000:]}"
        until = time.monotonic() + 20
        while not list(tmp.glob("kernelcheck-*/**/pip-*")) and time.monotonic() < until and _alive(pip):
            time.sleep(0.1)  # pip is at work once its temporary folders exist
        assert list(tmp.glob("kernelcheck-*/**/pip-*")), "pip's temporary folders are inside the forecast's"
        assert not list(tmp.glob("pip-*"))  # and never beside them, where nothing would remove them
        if how == "SIGKILL":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, getattr(signal, how))
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.monotonic() + 30
    while _alive(pip) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pip), "pip outlived the forecast"
    if how == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL
        left = sorted(p.name for p in tmp.iterdir())
        assert left and all(n.startswith((f"kernelcheck-resolve-{proc.pid}-", f"kernelcheck-forecast-{proc.pid}-"))
                            for n in left), left  # pip's own folders are inside them, not beside
        assert sorted(p.name for p in overlay.sweep(tmp)) == left  # what the next forecast does first
    else:
        assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[how], err[-2000:]
        assert "Traceback" not in err
    assert sorted(p.name for p in tmp.iterdir()) == []
