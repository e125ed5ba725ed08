"""`verify --packing` on batches built by TRL's real padding-free collator (trl.trainer.sft_trainer.
DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True), what SFTTrainer uses with
SFTConfig(padding_free=True)), through tests/programs/trl_padding_free.py, on the tiny Qwen3.5 layers on CPU.

What TRL passes, read from the releases' source and checked here on the saved batch:
- trl 1.15.0 (and every release before 1.16.0): input_ids, labels and restarting position_ids only, so
  packing-position-ids-only fires and the Gated DeltaNet layer mixes the segments (exit 4);
- trl 1.16.0: also cu_seq_lens_q/k, max_length_q/k and seq_idx: the lint is clean; transformers' torch path refuses
  the keys (exit 3), and where the kernels are bound (tests/programs/fake_kernels) seq_idx reaches the conv,
  cu_seqlens the GDN kernel, and every segment matches (exit 0).
trl runs in a child process, with sites (tests/envs.py trl_sites) first on PYTHONPATH: it is not in the venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.envs import REPO, run_json, trl_sites

pytestmark = pytest.mark.integration
PROGRAMS = REPO / "tests" / "programs"
FAKE_KERNELS = PROGRAMS / "fake_kernels"
LENGTHS = ("40", "70", "30")  # across fla's chunk of 64


def _trl_batch(version: str, out: Path) -> dict:
    """TRL's padding-free batch for LENGTHS, saved by its real collator to `out` (torch.save) and read back."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(s) for s in trl_sites(version))}
    res = subprocess.run([sys.executable, str(PROGRAMS / "trl_padding_free.py"), str(out), *LENGTHS],
                         capture_output=True, text=True, env=env, cwd=str(PROGRAMS), timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return torch.load(str(out), weights_only=True)


def _verify(pt: Path, *sites: Path) -> tuple[int, dict]:
    code, rep = run_json(["verify", "--model", "qwen3.8-27b", "--packing", "--batch", str(pt)], *sites,
                         env={"USE_HUB_KERNELS": "0"})
    assert code == rep["exit_code"]
    return code, rep


def test_trl_1_15_padding_free_passes_position_ids_only_and_the_gdn_layer_mixes_the_segments(tmp_path: Path):
    pt = tmp_path / "trl115.pt"
    batch = _trl_batch("1.15.0", pt)
    assert sorted(batch) == ["input_ids", "labels", "position_ids"]
    code, rep = _verify(pt)
    # certain from the reach (the recurrent kernels got no boundary), then measured (the segments mix)
    assert code == 4 and [f["id"] for f in rep["findings"]] == [
        "packing-position-ids-only", "packing-kernel-gets-no-boundary", "packing-kernel-gets-no-boundary",
        "packing-segment-mixed"]
    assert rep["batch"]["segments"] == [[0, 40], [40, 110], [110, 140]]
    assert rep["batch"]["segments_from"] == "position_ids"
    assert all(r["received"] == [] for r in rep["reach"])
    assert [s["wrong"] for s in rep["segments"]] == [True, True, True]
    assert rep["segments"][1]["first_layer"] == "layer 0 (linear_attention)"


def test_trl_1_16_padding_free_passes_cu_seq_lens_and_seq_idx_and_they_reach_the_bound_kernels(tmp_path: Path):
    pt = tmp_path / "trl116.pt"
    batch = _trl_batch("1.16.0", pt)
    assert sorted(batch) == ["cu_seq_lens_k", "cu_seq_lens_q", "input_ids", "labels", "max_length_k",
                             "max_length_q", "position_ids", "seq_idx"]
    assert batch["cu_seq_lens_q"].tolist() == [0, 40, 110, 140] and batch["max_length_q"] == 70
    # the torch path (the venv's transformers 5.24, no kernels): the lint is clean, the conv's guard refuses
    code, rep = _verify(pt)
    assert code == 3 and [f["id"] for f in rep["findings"]] == ["packing-torch-path-refuses"]
    assert rep["batch"]["segments_from"] == "cu_seq_lens_q" and rep["segments"] == []
    conv = {r["function"]: r for r in rep["reach"]}["causal_conv1d_fn"]
    assert conv["received"] == ["cu_seq_lens_q", "cu_seq_lens_k", "seq_idx"] and conv["passed"] == []
    # the kernels bound (fake_kernels: torch code under causal-conv1d's and fla's names): each key reaches its kernel
    code, rep = _verify(pt, FAKE_KERNELS)
    reach = {r["function"]: r for r in rep["reach"]}
    assert code == 0 and [f["id"] for f in rep["findings"]] == ["packing-segments-match"]
    assert reach["causal_conv1d_fn"]["fast"] and reach["causal_conv1d_fn"]["passed"] == ["seq_idx"]
    assert reach["chunk_gated_delta_rule"]["fast"] and reach["chunk_gated_delta_rule"]["passed"] == ["cu_seqlens"]
    assert [s["wrong"] for s in rep["segments"]] == [False, False, False]


def test_collator_option_builds_the_batch_with_trls_collator_from_lengths(tmp_path: Path):
    """--collator trl_padding_free:collate --lengths, run from the folder that holds the module (a user's job)."""
    lens = tmp_path / "lens.txt"
    lens.write_text("30\n50\n20\n")
    args = ["verify", "--model", "qwen3.8-27b", "--packing", "--collator", "trl_padding_free:collate",
            "--lengths", str(lens)]
    code, rep = run_json(args, *trl_sites("1.15.0"), env={"USE_HUB_KERNELS": "0"}, cwd=PROGRAMS)
    assert code == rep["exit_code"] == 4
    assert [f["id"] for f in rep["findings"]] == [
        "packing-position-ids-only", "packing-kernel-gets-no-boundary", "packing-kernel-gets-no-boundary",
        "packing-segment-mixed"]
    assert rep["batch"]["source"] == "--collator trl_padding_free:collate"
    assert rep["batch"]["segments"] == [[0, 30], [30, 80], [80, 100]]
    assert sorted(rep["batch"]["keys"]) == ["input_ids", "labels", "position_ids"]
    code, rep = run_json(args, *trl_sites("1.16.0"), env={"USE_HUB_KERNELS": "0"}, cwd=PROGRAMS)
    assert code == rep["exit_code"] == 3 and [f["id"] for f in rep["findings"]] == ["packing-torch-path-refuses"]
    assert rep["batch"]["segments"] == [[0, 30], [30, 80], [80, 100]]
    assert "seq_idx" in rep["batch"]["keys"] and rep["batch"]["segments_from"] == "cu_seq_lens_q"
