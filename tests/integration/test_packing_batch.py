"""The integration half of tests/unit/test_packing_batch.py: `verify --packing --batch/--collator/--benchmark` on
the real tiny layers on CPU (transformers 5.24, the venv: the torch path, no fla-core / causal-conv1d).

Packed vs each segment alone, forward and backward: a position_ids-only batch mixes in the Gated DeltaNet layer
(exit 4, the first segment's forward untouched); the collator's flash batch is refused by the torch path (exit 3)
after cu_seq_lens and seq_idx reached the conv's wrapper; an attention-only model keeps them apart (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kernelcheck.core import matrix
from kernelcheck.packing import batchfile
from kernelcheck.verify import packing_batch

pytestmark = pytest.mark.integration
SEQS = [list(range(1, 41)), list(range(2, 72)), list(range(3, 33))]  # 40 + 70 + 30: across fla's chunk of 64


def _batch(**flags: bool) -> dict:
    from transformers import DataCollatorWithFlattening

    return dict(DataCollatorWithFlattening(**flags)([{"input_ids": s} for s in SEQS]))


def _cli(*args: str) -> tuple[int, dict]:
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    res = CliRunner().invoke(main, ["verify", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)  # progress goes to stderr


def test_position_ids_only_mixes_from_the_gdn_layer_and_names_the_segment():
    _, sec, found = packing_batch.check("qwen3.8-27b", batchfile.check(_batch(), "t"), m=matrix.load())
    ids = [f.id for f in found]
    assert ids == ["packing-position-ids-only", "packing-kernel-gets-no-boundary", "packing-kernel-gets-no-boundary",
                   "packing-segment-mixed"]
    first, second, third = sec.segments
    assert (first.start, first.end, second.start, third.end) == (0, 40, 40, 140)
    assert first.output_max_abs == 0.0 and first.wrong and first.first_layer is None  # its grads carry the mix
    assert second.wrong and second.first_layer == "layer 0 (linear_attention)" and second.output_rel_l2 > 1e-3
    reach = {r.function: r for r in sec.reach}
    assert set(reach) == {"causal_conv1d_fn", "chunk_gated_delta_rule", "attention"}
    assert all(r.received == () and r.passed == () and not r.fast for r in reach.values())


def test_the_torch_path_refuses_the_flash_batch_after_the_keys_reached_the_conv():
    _, sec, found = packing_batch.check("qwen3.8-27b", batchfile.check(_batch(return_flash_attn_kwargs=True,
                                                                                return_seq_idx=True), "t"),
                                        m=matrix.load())
    assert [f.id for f in found] == ["packing-torch-path-refuses"] and found[0].severity == "fallback"
    conv = {r.function: r for r in sec.reach}["causal_conv1d_fn"]
    assert conv.received == ("cu_seq_lens_q", "cu_seq_lens_k", "seq_idx") and conv.passed == () and conv.error
    assert sec.segments == [] and sec.error


def test_an_attention_only_model_keeps_position_ids_packing_apart_forward_and_backward():
    _, sec, found = packing_batch.check("llama", batchfile.check(_batch(), "t"), m=matrix.load())
    assert [f.id for f in found] == ["packing-segments-match"]
    assert [s.wrong for s in sec.segments] == [False, False, False]
    assert max(s.grad_rel_l2 for s in sec.segments) < sec.tolerance
    # the same batch with an attention_mask (TRL's padding-free warning): the attention finds no boundaries
    masked = {**_batch(), "attention_mask": torch.ones(1, 140, dtype=torch.long)}
    _, sec, found = packing_batch.check("llama", batchfile.check(masked, "t"), m=matrix.load())
    assert [f.id for f in found] == ["packing-attention-mask-hides-boundaries", "packing-segment-mixed"]
    assert [s.first_layer for s in sec.segments][1:] == ["layer 0 (LlamaDecoderLayer)"] * 2


def test_cli_batch_file_collator_and_bad_offsets(tmp_path: Path):
    import jsonschema

    from kernelcheck import schemas

    pt = tmp_path / "b.pt"
    torch.save(_batch(), pt)
    code, rep = _cli("--model", "qwen3.8-27b", "--packing", "--batch", str(pt))
    jsonschema.validate(rep, schemas.load("verify-packing"))
    assert code == rep["exit_code"] == 4 and rep["verdict"] == "broken"
    assert rep["batch"]["segments"] == [[0, 40], [40, 110], [110, 140]] and rep["batch"]["segments_from"] == (
        "position_ids")
    lens = tmp_path / "lens.txt"
    lens.write_text("30\n50\n20\n")
    code, rep = _cli("--model", "qwen3.8-27b", "--packing", "--collator",
                     "transformers:DataCollatorWithFlattening", "--lengths", str(lens))
    assert code == 4 and rep["batch"]["segments"] == [[0, 30], [30, 80], [80, 100]]
    bad = {**_batch(return_flash_attn_kwargs=True), "cu_seq_lens_q": torch.tensor([0, 40, 30, 140],
                                                                                   dtype=torch.int32)}
    torch.save(bad, pt)
    code, rep = _cli("--model", "qwen3.8-27b", "--packing", "--batch", str(pt))
    assert code == 4 and rep["ran"] is False and rep["reach"] == [] and [f["id"] for f in rep["findings"]] == [
        "packing-cu-seqlens-not-monotonic"]


def test_cli_payoff_on_cpu_times_both_steps(tmp_path: Path):
    import jsonschema

    from kernelcheck import schemas

    lens = tmp_path / "lens.txt"
    lens.write_text("64\n8\n8\n4\n")
    code, rep = _cli("--model", "qwen3.8-27b", "--packing", "--benchmark", "--lengths", str(lens))
    jsonschema.validate(rep, schemas.load("verify-packing"))
    p = rep["payoff"]
    assert code == 0 and [f["id"] for f in rep["findings"]] == ["packing-payoff"]
    assert (p["real_tokens"], p["padded_tokens"], p["shape"]) == (84, 256, "tiny")
    assert p["padded_s"] > 0 and p["packed_s"] > 0 and p["ratio"] == pytest.approx(p["padded_s"] / p["packed_s"],
                                                                                   rel=1e-2)
    assert p["packing_speedup_bound"] == pytest.approx(256 / 84, rel=1e-3)
    assert p["packed_with"].startswith("position_ids")  # the torch path refuses cu_seq_lens: timing only


def test_transformers_5_17_drops_the_keys_silently_before_the_torch_conv_and_the_segments_mix(tmp_path: Path):
    """No guard in 5.17.0: the conv's and the GDN's torch functions receive cu_seq_lens and seq_idx, the wrapper
    keeps only the parameters they declare, none reaches them, and the segments mix (exit 4, not 3)."""
    import os
    import subprocess
    import sys

    from tests.envs import site

    tf = site("transformers==5.17.0", deps=True)
    pt = tmp_path / "b.pt"
    torch.save(_batch(return_flash_attn_kwargs=True, return_seq_idx=True), pt)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{tf}{os.pathsep}{root}", "USE_HUB_KERNELS": "0"}
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--packing",
                          "--batch", str(pt), "--json"], capture_output=True, text=True, env=env, timeout=300)
    rep = json.loads(res.stdout)
    assert res.returncode == rep["exit_code"] == 4, res.stderr[-2000:]
    assert [f["id"] for f in rep["findings"]][:2] == ["packing-kernel-gets-no-boundary"] * 2
    reach = {r["function"]: r for r in rep["reach"]}
    assert reach["causal_conv1d_fn"]["received"] == ["cu_seq_lens_q", "cu_seq_lens_k", "seq_idx"]
    assert reach["chunk_gated_delta_rule"]["received"][0] == "cu_seqlens"
    assert reach["causal_conv1d_fn"]["passed"] == reach["chunk_gated_delta_rule"]["passed"] == []
    # the clean packing mixes on this path too, so it is no negative control: a second alone run is
    assert rep["controls"]["negative"]["kind"] == "rerun" and rep["controls"]["decided"]
    assert [s["wrong"] for s in rep["segments"]] == [True, True, True]
    assert rep["segments"][1]["first_layer"] == "layer 0 (linear_attention)"


def _with_fake_kernels(pt: Path, drop: str | None = None) -> tuple[int, dict]:
    """verify --packing --batch in a process where tests/programs/fake_kernels stand in for causal-conv1d and fla
    (torch code with their names and keyword arguments): transformers binds them as the fast path."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root / 'tests' / 'programs' / 'fake_kernels'}{os.pathsep}{root}",
           "USE_HUB_KERNELS": "0"}
    env.pop("FAKE_KERNELS_DROP", None)
    if drop:
        env["FAKE_KERNELS_DROP"] = drop
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--packing",
                          "--batch", str(pt), "--json"], capture_output=True, text=True, env=env, timeout=300)
    rep = json.loads(res.stdout)
    assert res.returncode == rep["exit_code"], res.stderr[-2000:]
    return res.returncode, rep


def test_on_the_bound_path_each_key_reaches_its_kernel_and_the_segments_match(tmp_path: Path):
    pt = tmp_path / "b.pt"
    torch.save(_batch(return_flash_attn_kwargs=True, return_seq_idx=True), pt)
    code, rep = _with_fake_kernels(pt)
    reach = {r["function"]: r for r in rep["reach"]}
    assert code == 0 and [f["id"] for f in rep["findings"]] == ["packing-segments-match"]
    assert rep["controls"]["negative"]["kind"] == "clean" and rep["controls"]["decided"]
    assert reach["causal_conv1d_fn"]["fast"] and reach["causal_conv1d_fn"]["passed"] == ["seq_idx"]
    assert reach["chunk_gated_delta_rule"]["fast"] and reach["chunk_gated_delta_rule"]["passed"] == ["cu_seqlens"]
    assert reach["causal_conv1d_fn"]["implementation"] == "causal_conv1d.causal_conv1d_fn"


def test_slime_a_conv_that_never_gets_seq_idx_mixes_the_segments_and_the_reach_shows_where(tmp_path: Path):
    """slime#1686: cu_seqlens reaches the GDN kernel but not the conv. The conv here has no seq_idx parameter, so
    transformers' wrapper drops it before the call."""
    pt = tmp_path / "b.pt"
    torch.save(_batch(return_flash_attn_kwargs=True, return_seq_idx=True), pt)
    code, rep = _with_fake_kernels(pt, drop="seq_idx")
    reach = {r["function"]: r for r in rep["reach"]}
    assert code == 4 and [f["id"] for f in rep["findings"]] == ["packing-kernel-gets-no-boundary",
                                                               "packing-segment-mixed"]
    assert reach["causal_conv1d_fn"]["received"] == ["cu_seq_lens_q", "cu_seq_lens_k", "seq_idx"]
    assert reach["causal_conv1d_fn"]["passed"] == [] and reach["chunk_gated_delta_rule"]["passed"] == ["cu_seqlens"]
    assert rep["segments"][1]["first_layer"] == "layer 0 (linear_attention)"


def test_veomni_seq_idx_counting_an_empty_segment_keeps_the_conv_wrong_where_the_offsets_are_right(tmp_path: Path):
    """VeOmni#1076: offsets with an empty segment and a seq_idx that puts the boundary elsewhere: the lint names
    the token, and on the bound path the conv keeps other sequences apart than the GDN kernel: measured wrong."""
    b = _batch(return_flash_attn_kwargs=True, return_seq_idx=True)
    b["seq_idx"] = torch.tensor([[0] * 50 + [1] * 60 + [2] * 30], dtype=torch.int32)  # boundary at 50, not 40
    pt = tmp_path / "b.pt"
    torch.save(b, pt)
    code, rep = _with_fake_kernels(pt)
    # each kernel misses the start the other key shows (offsets at 40, seq_idx at 50): broken from the reach
    assert code == 4 and [f["id"] for f in rep["findings"]] == [
        "packing-seq-idx-mismatch", "packing-kernel-misses-boundary", "packing-kernel-misses-boundary",
        "packing-segment-mixed"]
    assert rep["batch"]["segments"] == [[0, 40], [40, 50], [50, 110], [110, 140]]
    assert [s["wrong"] for s in rep["segments"]][:2] == [True, True]
