"""verify's instrument reaches transformers' implementation cells through kernels 0.19's decorator, which turns a
decorated function into an nn.Module instance (measured on the H200: without this, verify said FALLBACK for a
5.25 + kernels 0.19.1 job that ran fla's kernels, docs/measurements/2026-12-03-h200-differential-559fb36)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.envs import REPO, site

pytestmark = pytest.mark.integration

FUNCS = ["torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn", "causal_conv1d_update"]


def test_cells_are_found_through_the_kernels_module_wrapper():
    tf = site("transformers==5.25.0", "kernels==0.19.1", deps=True)
    env = {"PYTHONPATH": f"{tf}:{REPO}", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, str(REPO / "tests" / "programs" / "closure_cells.py"),
                          "transformers.models.qwen3_5.modeling_qwen3_5", *FUNCS], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]  # the slots as 5.25 names them in modeling_qwen3_5
    cells = json.loads(res.stdout.strip().splitlines()[-1])
    for fn in FUNCS:
        assert {"implementation", "torch_function"} <= set(cells[fn]), (fn, cells[fn])
