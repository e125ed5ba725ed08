"""The fast lane is in-process only: a test there that launches a process fails, naming the call
(tests/lanes.py, applied by tests/conftest.py to every test outside the integration lane)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import HERE, lane_of
from tests.lanes import ProcessInFastLane


@pytest.mark.parametrize("launch", [
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=False),
    lambda: subprocess.check_output(["true"]),
    lambda: os.system("true"),
    lambda: os.fork(),
    lambda: os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], dict(os.environ)),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
], ids=["subprocess.run", "check_output", "os.system", "os.fork", "posix_spawn", "multiprocessing"])
def test_a_fast_lane_test_that_launches_a_process_fails_naming_the_call(launch: Callable[[], object]) -> None:
    with pytest.raises(ProcessInFastLane, match="fast lane"):
        launch()


def test_the_folder_is_the_lane_and_a_misplaced_test_is_refused() -> None:
    assert lane_of(("unit", "test_x.py"), False) == "fast"
    assert lane_of(("integration", "test_x.py"), False) == "integration"
    assert lane_of(("integration", "test_x.py"), True) == "integration"
    assert lane_of(("unit", "test_x.py"), True) is None  # marked slow/integration but in the fast lane's folder
    assert lane_of(("test_x.py",), False) is None  # outside both folders


def test_every_test_module_lives_in_one_lane_folder_and_pip_torchrun_kernelcheck_tests_are_integration() -> None:
    assert not list(HERE.glob("test_*.py"))
    integration = {p.stem for p in (HERE / "integration").glob("test_*.py")}
    assert {"test_fleet", "test_proofcache", "test_packing", "test_install_artifacts"} <= integration
