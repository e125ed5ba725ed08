"""A process-group SIGKILL of kernelcheck while its pip runs. pip runs in its own session, so the
group kill misses it; core/lifeline.py ties pip's life to kernelcheck's (PR_SET_PDEATHSIG) and records it in the
install lock, so the next install ends a pip its dead owner left. Real kills at random points, bounded: a few
seconds each (the program), one real `install --target` killed while its pip runs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelcheck.core import lifeline
from tests.envs import REPO

pytestmark = pytest.mark.integration
PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "lifeline_parent.py"


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not lifeline.alive([pid]):
            return True
        time.sleep(0.02)
    return False


def _start(mode: str, lock: Path) -> tuple[subprocess.Popen, int]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([sys.executable, str(PROGRAM), mode, str(lock)], stdout=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    line = proc.stdout.readline() if proc.stdout else ""
    return proc, json.loads(line)["child"]


@pytest.mark.parametrize("seed", range(4))
def test_a_group_kill_at_a_random_point_takes_the_tied_child_with_it(tmp_path: Path, seed: int) -> None:
    proc, child = _start("tied", tmp_path / "lock")
    time.sleep(random.Random(seed).uniform(0, 0.5))
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group of the parent, as a CI runner's cancel does
    proc.wait(timeout=10)
    assert _gone(child, 5.0), f"child {child} outlived its parent"


def test_an_untied_child_of_a_dead_owner_is_ended_by_the_next_lock_holder(tmp_path: Path) -> None:
    """The second guard: where no parent-death signal was set (another thread, another OS), the next install reads
    the dead owner's lock record and ends the child it left."""
    lock = tmp_path / "lock"
    proc, child = _start("untied", lock)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    try:
        assert lifeline.alive([child]) == [child]  # orphaned, still running: the defect
        said: list[str] = []
        assert lifeline.end_orphans(lock.read_text(), said.append) == [child]
        assert _gone(child, 10.0) and said
    finally:
        if lifeline.alive([child]):
            os.killpg(child, signal.SIGKILL)


def test_a_finished_childs_record_names_nothing_to_end(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert lifeline.orphans(f"pid 1 since 00:00:00\nchild {done.stdout.strip()} 12345\n") == []


def _pips_into(site: Path) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"pip" in cmd and str(site).encode() in cmd and lifeline.alive([int(d.name)]):
                out.append(int(d.name))
    return out


def test_a_group_kill_of_install_target_leaves_no_pip_writing(tmp_path: Path) -> None:
    """The real command: `install --target T` SIGKILLed as a group once its pip has started (at a random moment
    after), then no pip may still be installing into T."""
    import shutil

    from tests.kcfixtures import cuda_torch_venv, pypi_wheels

    wh = tmp_path / "wh"
    wh.mkdir()
    for pat in ("fla_core-*.whl", "einops-*.whl"):
        for w in pypi_wheels().glob(pat):
            shutil.copy(w, wh)
    py, site = cuda_torch_venv() / "bin" / "python", tmp_path / "site"
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1")
    err = tmp_path / "err"
    with open(err, "w") as fe:
        proc = subprocess.Popen([str(py), "-m", "kernelcheck", "install", "--model", "qwen3.8-27b", "--package",
                                 "fla-core", "--arch", "9.0", "--offline", "--wheelhouse", str(wh), "--target",
                                 str(site)], stdout=subprocess.DEVNULL, stderr=fe, env=env, start_new_session=True)
    deadline = time.monotonic() + 300
    while not (pips := _pips_into(site)):
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
        time.sleep(0.02)
    time.sleep(random.uniform(0, 0.2))
    for pid in pips:  # held still, as a pip deep in a quiet unpack is: no write to a closed pipe will end it
        os.kill(pid, signal.SIGSTOP)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _pips_into(site) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _pips_into(site)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "pip kept installing into the target after kernelcheck was killed"


def test_taking_the_install_lock_ends_the_pip_its_dead_owner_left(tmp_path: Path) -> None:
    """The lock's owner check inside install/apply.py `locked`: the lock file of a killed install names its live
    child; the next install, on taking the lock, ends it before anything else runs."""
    from kernelcheck.install import apply

    lock = tmp_path / "wh" / ".kernelcheck.lock"
    lock.parent.mkdir()
    proc, child = _start("untied", lock)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    said: list[str] = []
    try:
        assert lifeline.alive([child]) == [child]
        with apply.locked([lock], progress=said.append):
            assert _gone(child, 10.0), "the dead owner's child still runs inside the new lock"
        assert said and str(child) in said[0]
        assert "child" not in lock.read_text()  # the new owner's record: its own pid, no stale children
    finally:
        if lifeline.alive([child]):
            os.killpg(child, signal.SIGKILL)
