"""verify on the bound path on the CPU (tests/programs/fake_kernels: torch code with causal-conv1d's and fla's names,
which transformers binds as the fast path): each fast function's comparison with the torch reference carries its
controls in the JSON, the positive one (the gate dropped, the conv's input scaled) detected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_every_compared_function_shows_its_positive_control_detected():
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests' / 'programs' / 'fake_kernels'}{os.pathsep}{ROOT}",
           "USE_HUB_KERNELS": "0", "HF_HUB_OFFLINE": "1"}
    env.pop("FAKE_KERNELS_DROP", None)
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--json"],
                         capture_output=True, text=True, env=env, timeout=900)
    rep = json.loads(res.stdout)
    compared = {f["name"]: f["evidence"]["vs_reference"] for f in rep["functions"]
                if (f.get("evidence") or {}).get("vs_reference", {}).get("compared")}
    assert set(compared) == {"chunk_gated_delta_rule", "causal_conv1d_fn"}, res.stderr[-2000:]
    for fn, vs in compared.items():
        c = vs["controls"]
        assert vs["ok"] is True and c["decided"] is True and c["negative_rel_err"] == 0.0, (fn, vs)
        assert c["positive_rel_err"] > 2 * vs["tolerance"], (fn, vs)
    assert compared["chunk_gated_delta_rule"]["controls"]["perturbed"] == "g dropped"
    assert "verify-control-cannot-decide" not in [f["id"] for f in rep["findings"]]
