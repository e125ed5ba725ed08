"""The fast lane runs in-process only: a test there that launches a process fails at once, naming the call.

tests/conftest.py applies `forbid_processes` to every test that is not in the integration lane. Everything that
starts another program goes through one of the calls patched here: subprocess (run, check_output, Popen: its
`_execute_child`), multiprocessing's spawn/forkserver (`util.spawnv_passfds`), and the os calls (fork, forkpty,
posix_spawn[p], system, exec*, spawn*). A test that must launch a process belongs in the integration lane:
a module in tests/integration (the folder is the lane: tests/conftest.py).
"""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

OS_CALLS = ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve", "execvp", "execvpe",
            "spawnv", "spawnve", "spawnvp", "spawnvpe", "popen")


class ProcessInFastLane(AssertionError):
    """Raised by a patched process call in a fast-lane test."""


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        argv = args[1] if what == "subprocess.Popen" and len(args) > 1 else args[:2]
        raise ProcessInFastLane(
            f"{what} ({str(argv)[:200]}) was called by a fast-lane test: the fast lane (-m 'not integration') "
            "runs in-process only. "
            "Move the test to a module in tests/integration, or test the decision with explicit inputs.")

    return refuse


def forbid_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse("subprocess.Popen"))
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", _refuse("multiprocessing spawn"))
    for name in OS_CALLS:
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse(f"os.{name}"))
