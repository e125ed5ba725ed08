"""The integration half of tests/unit/test_submodels.py: processes, pip or builds (the in-process tests
are there).

Sub-config types and Hub hooks read from transformers' source (the CPU ground truth):"""

from __future__ import annotations

import pytest

from tests.envs import TF525, function, run_json, site


@pytest.mark.integration
def test_doctor_on_the_vision_tower_is_ready_and_says_why():
    code, rep = run_json(["doctor", "--model", "qwen3_5_vision"])
    assert code == 0, rep
    assert [f["name"] for f in rep["functions"]] == ["attention:sdpa"]
    f = next(x for x in rep["findings"] if x["id"] == "sub-model-without-kernels")
    assert f["severity"] == "info" and "chunk_gated_delta_rule" in f["functions"]
    code, rep = run_json(["doctor", "--model", "qwen3_5_text"])  # the text model keeps the parent's needs
    assert code == 3 and function(rep, "chunk_gated_delta_rule")["status"] == "fallback"


@pytest.mark.integration
def test_doctor_on_5_25_vision_tower_with_its_kernels_is_ready():
    code, rep = run_json(["doctor", "--model", "qwen3_5_vision"], site(*TF525, deps=True),
                         env={"USE_HUB_KERNELS": "0"})
    assert code == 0, rep
    assert [f["name"] for f in rep["functions"]] == ["attention:sdpa"]


@pytest.mark.integration
@pytest.mark.parametrize("model", ["llama", "mamba2"])
def test_5_13_rotary_hub_decorator_raises_no_unread_warning(model):
    code, rep = run_json(["doctor", "--model", model], site("transformers==5.13.1", deps=True))
    assert rep["environment"]["transformers"] == "5.13.1"
    assert not any(f["id"] == "kernel-decorator-unread" for f in rep["findings"]), rep["findings"]
    assert code == (0 if model == "llama" else 3)
