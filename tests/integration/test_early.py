"""One real invocation of a usage error, timed: answered in about a second, before any probe (the unit half,
tests/unit/test_early.py, proves the probe is never reached)."""

from __future__ import annotations

import time

import pytest

from tests.envs import run

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("args", [["doctor", "--model", "qwen3.8-72b"], ["doctor", "--upgrade", "transformers=5.24.0"]],
                         ids=["model", "spec"])
def test_a_usage_error_is_answered_in_about_a_second(args):
    t0 = time.monotonic()
    res = run(args, timeout=120)
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stderr[-2000:]
    assert took < 2.0, f"{took:.2f} s"  # measured 0.2 s; the probe alone (torch import) takes 2-3 s quiet
