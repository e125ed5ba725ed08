"""The fast lane is in-process only: a test there that launches a process fails, naming the call
(tests/lanes.py, applied by tests/conftest.py to every test outside the integration lane)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest

from tests.conftest import INTEGRATION_MODULES
from tests.lanes import ProcessInFastLane


@pytest.mark.parametrize("launch", [
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=False),
    lambda: subprocess.check_output(["true"]),
    lambda: os.system("true"),
    lambda: os.fork(),
    lambda: os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], dict(os.environ)),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
], ids=["subprocess.run", "check_output", "os.system", "os.fork", "posix_spawn", "multiprocessing"])
def test_a_fast_lane_test_that_launches_a_process_fails_naming_the_call(launch) -> None:
    with pytest.raises(ProcessInFastLane, match="fast lane"):
        launch()


@pytest.mark.integration
def test_the_integration_lane_may_launch_processes() -> None:
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout == "42\n"


def test_the_modules_that_launch_pip_torchrun_or_kernelcheck_are_in_the_integration_lane() -> None:
    assert {"test_fleet", "test_proofcache", "test_packing", "test_install_artifacts"} <= INTEGRATION_MODULES
