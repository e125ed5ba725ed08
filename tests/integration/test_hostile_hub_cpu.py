"""`kernelcheck hub --model qwen3.8-27b` on a CPU box under transformers 5.25: no Hub kernel is
mapped for the CPU, so nothing was checked, and a gate never says READY when nothing was checked (DESIGN.md). The
stack: transformers 5.25.0 + kernels 0.19.1 installed the normal way (tests/envs.py TF525), torch 2.13 CPU."""

from __future__ import annotations

import pytest

from tests.envs import TF525, run_json, site

pytestmark = pytest.mark.integration


def test_hub_on_a_cpu_box_under_5_25_is_not_ready_when_nothing_was_checked(tmp_path) -> None:
    code, report = run_json(["hub", "--model", "qwen3.8-27b"], site(*TF525, deps=True),
                            env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "cache")})
    assert report["environment"]["transformers"].startswith("5.25"), report["environment"]
    assert not (code == 0 and report["verdict"] == "ready"), report["findings"]
    assert code in (2, 3, 4) and code == report["exit_code"]
