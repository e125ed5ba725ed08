"""The integration half of tests/unit/test_packing_batches.py: processes, pip or builds (the in-process tests
are there).

verify --packing on the collator's batches: the batch each mode builds, the verdict logic, and the root"""

from __future__ import annotations

import json

import pytest

from kernelcheck.packing import batches
from kernelcheck.verify import packing
from tests.unit.test_packing_batches import (  # helpers and fixtures of the in-process half
    FACTS,
)


@pytest.mark.integration
def test_the_cache_is_what_mixed_the_attention_layer_not_the_batch():
    """The root cause of `flash mixed` (0.287, full_attention 0.031) on the H200: verify's forward kept the
    config's use_cache, so transformers made a cache and skipped finding the packed sequences. Attention-only
    tiny Qwen3.5 (no fla/conv involved), the collator's position_ids batch, every length."""
    model = packing.tiny_model("cpu", ("full_attention", "full_attention"))
    for name, lens in batches.LENGTHS.items():
        clean = packing.measure_lengths(model, "position_ids", name, lens, "cpu", FACTS)
        cached = packing.measure_lengths(model, "position_ids", name, lens, "cpu", FACTS, use_cache=True)
        assert clean.outcome == "correct" and clean.max_logit_diff < 1e-5, clean
        assert clean.per_layer_type == {"full_attention": pytest.approx(0.0, abs=1e-5)}
        assert cached.outcome == "mixed" and cached.max_logit_diff > 0.05, cached


@pytest.mark.integration
def test_verify_packing_on_cpu_agrees_with_doctor_for_every_mode():
    """transformers 5.24 (the venv), no fla/causal-conv1d: the torch path. position_ids mixes in the GDN layer
    only (the attention keeps the sequences apart without a cache); the kwargs modes raise (the guard)."""
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--packing", "flash", "--json"])
    rep = json.loads(res.stdout)
    assert res.exit_code == 4 and rep["verdict"] == "broken" and rep["judged_mode"] == "flash"
    modes = {m["mode"]: m for m in rep["packing"]}
    assert {m: r["outcome"] for m, r in modes.items()} == {"position_ids": "mixed", "cu_seq_lens": "raises",
                                                          "flash": "raises"}
    assert all(r["agrees"] for r in modes.values()), modes
    pid = modes["position_ids"]
    assert [x["name"] for x in pid["lengths"]] == ["short", "chunk", "long"]
    assert pid["per_layer_type"]["linear_attention"] > 1e-3 and pid["per_layer_type"]["full_attention"] < 1e-5
    assert rep["cached_forward_max_logit_diff"] > 0.05
    doctor = CliRunner().invoke(main, ["doctor", "--model", "qwen3.8-27b", "--packing", "flash", "--json"])
    assert doctor.exit_code == res.exit_code
