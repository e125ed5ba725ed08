"""doctor's CUDA prediction on a machine without a GPU, with the real fla-core 0.6.0 + triton 3.6.0 installed next to
a real CUDA build of torch (2.14.1+cu130, the venv tests/kcfixtures.py builds) and transformers 5.25: the function
rows, the fla backend section and the fallback cost are judged for the CUDA device, not for this CPU."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.envs import REPO, TF525, function, site

pytestmark = pytest.mark.integration

FLA = ("fla-core==0.6.0", "einops", "triton==3.6.0")
GDN = ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule")
CONV = ("causal_conv1d_fn", "causal_conv1d_update")


def _doctor(*args: str) -> tuple[int, dict]:
    from tests.kcfixtures import cuda_torch_venv

    py = cuda_torch_venv() / "bin" / "python"
    path = os.pathsep.join([str(REPO), str(site(*TF525, deps=True)), str(site(*FLA))])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERNELCHECK_DEBUG")}
    res = subprocess.run([str(py), "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b", "--mode", "infer",
                          "--json", *args], capture_output=True, text=True, cwd=str(REPO), timeout=600,
                         env={**env, "HF_HUB_OFFLINE": "1", "USE_HUB_KERNELS": "0", "PYTHONPATH": path})
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    return res.returncode, json.loads(res.stdout)


def test_a_cuda_prediction_judges_the_fla_rows_and_the_cost_for_the_cuda_device():
    code, rep = _doctor("--arch", "9.0")  # an H100/H200 image built here (the pip packages: USE_HUB_KERNELS=0)
    assert rep["device"] == {"type": "cuda", "origin": "arch", "visible": False}
    for name in GDN:  # transformers 5.25's per-call device check passes on the GPU: fla's Triton kernels run
        fs = function(rep, name)
        assert (fs["status"], fs["provider"]) == ("fast", "pip:fla-core 0.6.0 / Triton"), fs
        assert fs["implementation"].startswith("fla.ops.gated_delta_rule."), fs
    for name in CONV:  # not installed: the torch path, priced
        assert (function(rep, name)["status"], function(rep, name)["provider"]) == ("fallback", "torch")
    assert code == 3 and rep["verdict"] == "fallback"
    cost = [f for f in rep["findings"] if f["id"] == "fallback-cost"]
    assert [f["functions"] for f in cost] == [list(CONV)], rep["findings"]
    assert {f["functions"][0] for f in rep["findings"] if f["id"] == "fla-backend"} == set(GDN)
    assert rep["backends"]["fla"] == "0.6.0"

    code, rep = _doctor()  # the default: the CUDA build's prediction, no GPU named
    assert rep["device"] == {"type": "cuda", "origin": "torch-build", "visible": False}
    for name in GDN:  # fla runs there, but whether fast depends on the GPU: not judged fast, not priced as torch
        fs = function(rep, name)
        assert (fs["status"], fs["provider"]) == ("unsupported", "pip:fla-core 0.6.0"), fs
        assert "--arch" in fs["fix"]
    assert code == 3 and [f["functions"] for f in rep["findings"] if f["id"] == "fallback-cost"] == [list(CONV)]
    assert rep.get("backends") is None  # no capability: fla's backend is not decided

    code, rep = _doctor("--device", "cpu")  # the verdict for running here: the torch functions, as before
    assert rep["device"]["type"] == "cpu"
    for name in GDN:
        fs = function(rep, name)
        assert (fs["status"], fs["provider"]) == ("unsupported", "torch"), fs
        assert fs["implementation"].startswith("transformers.models.qwen3_5.modeling_qwen3_5.torch_"), fs
