"""Packing decisions in process: what doctor decides for each collator mode on the torch path and on bound
kernels. The measured truth (real tiny Qwen3.5 runs per transformers regime) is in tests/integration/test_packing.py."""

from __future__ import annotations

from pathlib import Path

from kernelcheck.core import matrix
from kernelcheck.packing.decide import decide, load_facts, section

FACTS = load_facts(m=matrix.load())
GDN = ("causal_conv1d_fn", "chunk_gated_delta_rule")


def test_torch_path_outcomes_follow_the_guard() -> None:
    torch_path = dict.fromkeys(GDN, False)
    assert decide("position_ids", torch_path, FACTS, guard=True).outcome == "mixed"
    assert decide("flash", torch_path, FACTS, guard=True).outcome == "raises"
    assert decide("flash", torch_path, FACTS, guard=False).outcome == "mixed"
    assert decide("none", torch_path, FACTS, guard=False).outcome == "correct"


def test_bound_kernels_are_correct_only_with_every_kwarg_they_need() -> None:
    fast = dict.fromkeys(GDN, True)
    assert decide("flash", fast, FACTS, guard=True).outcome == "correct"
    o = decide("cu_seq_lens", fast, FACTS, guard=True)
    assert o.outcome == "mixed" and "causal_conv1d_fn gets no seq_idx" in o.reason  # wording: renderer test
    o = decide("position_ids", fast, FACTS, guard=True)
    assert o.outcome == "mixed" and "return_seq_idx=True" in (o.fix or "")


def test_models_without_linear_layers_get_no_section() -> None:
    assert section({"flash_attn_varlen_func": "fast"}, None, FACTS, Path("/nonexistent")) is None
