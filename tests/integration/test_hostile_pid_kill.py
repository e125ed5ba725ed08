"""SIGKILL to kernelcheck's own pid (the OOM killer's way: one process, not its group) leaves no child running:
every child kernelcheck starts asks the kernel to end it with its parent (core/lifeline.py PR_SET_PDEATHSIG). Real
processes: `verify --step`'s step worker (on a GPU each holds device memory) while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.envs import REPO

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(stat[1]) == pid and stat[0] != "Z":
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkill_of_verify_step_ends_its_step_workers(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", KERNELCHECK_HOME=str(tmp_path / "kc"))
    proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", "verify", "--step", "--model", "qwen3.8-27b"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while not workers and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            workers = _children(proc.pid)
        assert workers, "no step worker started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 15
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [w for w in workers if _alive(w)]
        assert left == [], f"step workers {left} outlived the SIGKILLed kernelcheck"
    finally:
        for w in workers:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
