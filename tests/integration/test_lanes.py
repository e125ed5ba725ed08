"""The integration half of tests/unit/test_lanes.py: processes, pip or builds (the in-process tests
are there).

The fast lane is in-process only: a test there that launches a process fails, naming the call"""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.integration
def test_the_integration_lane_may_launch_processes() -> None:
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout == "42\n"
