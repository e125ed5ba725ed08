"""The packed-vs-alone comparison with its controls, on real tiny layers and real collator batches
(transformers' DataCollatorWithFlattening): the torch path of the venv's transformers, and the bound path of
tests/programs/fake_kernels (torch code with causal-conv1d's and fla's names and keyword arguments, which keep
sequences apart by seq_idx and cu_seqlens), on the CPU in float32.

Every report carries both controls (the same segments packed clean; the same tokens with every boundary removed)
and decides from their separation; a recurrent kernel without its boundary is broken from the reach; partial
metadata (cu_seqlens without seq_idx, seq_idx without cu_seqlens, offsets covering the row as one segment) and
segments spanning several of fla's 64-token chunks are each caught, the conv's leak at the worst token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SEQS = [list(range(1, 41)), list(range(2, 72)), list(range(3, 33))]  # 40 + 70 + 30
LONG = [[i * 7 % 100 + 1 for i in range(150)], [i * 3 % 100 + 1 for i in range(130)]]  # 3 and 2+ chunks of 64
OLD_BF16_TOLERANCE = 5e-2  # the fixed relative-L2 tolerance the GPU passed a mixing batch under


def _batch(seqs: list[list[int]] = SEQS, **flags: bool) -> dict:
    from transformers import DataCollatorWithFlattening

    return dict(DataCollatorWithFlattening(**flags)([{"input_ids": s} for s in seqs]))


def _one_segment() -> dict:
    b = _batch(return_flash_attn_kwargs=True, return_seq_idx=True)
    cu = torch.tensor([0, 140], dtype=torch.int32)
    return {**b, "cu_seq_lens_q": cu, "cu_seq_lens_k": cu.clone(), "max_length_q": 140, "max_length_k": 140,
            "seq_idx": torch.zeros(1, 140, dtype=torch.int32)}


def _run(tmp_path: Path, batches: dict[str, dict], fake: bool) -> dict[str, tuple[int, dict]]:
    import jsonschema

    from kernelcheck import schemas

    paths = []
    for name, b in batches.items():
        torch.save(b, tmp_path / f"{name}.pt")
        paths.append(str(tmp_path / f"{name}.pt"))
    pp = [str(ROOT / "tests" / "programs" / "fake_kernels")] if fake else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*pp, str(ROOT)]), "USE_HUB_KERNELS": "0"}
    env.pop("FAKE_KERNELS_DROP", None)
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "programs" / "packing_cases.py"), "qwen3.8-27b",
                          *paths], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    for code, rep in got:
        jsonschema.validate(rep, schemas.load("verify-packing"))
        assert code == rep["exit_code"]
    return dict(zip(batches, ((c, r) for c, r in got), strict=True))


def _ids(rep: dict) -> list[str]:
    return [f["id"] for f in rep["findings"]]


def _reach(rep: dict) -> dict[str, list[str]]:
    return {r["function"]: r["passed"] for r in rep["reach"]}


def test_torch_path_position_ids_only_is_broken_from_the_reach_and_the_controls_measure_how_much(tmp_path):
    out = _run(tmp_path, {"pos": _batch(), "long": _batch(LONG)}, fake=False)
    for code, rep in out.values():
        assert code == 4
        assert _ids(rep)[1:3] == ["packing-kernel-gets-no-boundary"] * 2 and _ids(rep)[-1] == "packing-segment-mixed"
        c = rep["controls"]
        # the torch path refuses the clean packing: the negative control is each segment alone again
        assert c["negative"]["kind"] == "rerun" and c["negative"]["error"] is None
        assert c["positive"]["kind"] == "boundaries-removed" and c["decided"]
        assert c["positive"]["distance"] > c["margin"] * max(c["negative"]["distance"], 1e-6)
        assert c["negative"]["distance"] < c["threshold"] < c["positive"]["distance"]
    rep = out["pos"][1]
    # the mix sits under the old fixed tolerance, and is still told apart by the controls
    assert max(s["output_rel_l2"] for s in rep["segments"]) < OLD_BF16_TOLERANCE
    assert [s["wrong"] for s in rep["segments"]] == [True, True, True]
    long = out["long"][1]
    assert long["batch"]["segments"] == [[0, 150], [150, 280]] and long["segments"][1]["wrong"]


def test_bound_path_partial_metadata_each_caught_and_the_clean_batch_ready(tmp_path):
    out = _run(tmp_path, {
        "clean": _batch(return_flash_attn_kwargs=True, return_seq_idx=True),
        "cu_only": _batch(return_flash_attn_kwargs=True),
        "seq_idx_only": _batch(return_seq_idx=True),
        "one_segment": _one_segment(),
        "long_clean": _batch(LONG, return_flash_attn_kwargs=True, return_seq_idx=True),
        "removed": {"input_ids": _batch()["input_ids"], "position_ids": torch.arange(140)[None]},
    }, fake=True)
    code, clean = out["clean"]
    assert code == 0 and _ids(clean) == ["packing-segments-match"]
    c = clean["controls"]
    assert c["negative"]["kind"] == "clean" and c["decided"] and c["positive"]["distance"] > c["threshold"]
    assert all(not s["wrong"] and s["token_distance"] < c["threshold"] for s in clean["segments"])
    code, long = out["long_clean"]
    assert code == 0 and long["controls"]["decided"] and _ids(long) == ["packing-segments-match"]

    # cu_seqlens without seq_idx: the GDN kernel keeps the sequences apart, the conv's window crosses each start
    code, rep = out["cu_only"]
    assert code == 4 and _ids(rep) == ["packing-kernel-gets-no-boundary", "packing-segment-mixed"]
    assert rep["findings"][0]["functions"] == ["causal_conv1d_fn"] and _reach(rep)["chunk_gated_delta_rule"] == [
        "cu_seqlens"]
    for s in rep["segments"][1:]:  # the leak is at the segment's first kernel_size - 1 tokens
        assert s["wrong"] and s["worst_token"] < 3 and s["token_distance"] > 4 * s["output_rel_l2"]

    # seq_idx without cu_seqlens: the conv keeps them apart, the Gated DeltaNet state crosses
    code, rep = out["seq_idx_only"]
    assert code == 4 and _ids(rep) == ["packing-kernel-gets-no-boundary", "packing-segment-mixed"]
    assert rep["findings"][0]["functions"] == ["chunk_gated_delta_rule"]
    seg = rep["segments"][1]  # a whole-segment norm dilutes it below the old fixed tolerance many times over
    assert seg["wrong"] and seg["output_rel_l2"] < OLD_BF16_TOLERANCE / 10 < seg["token_distance"]

    # offsets (and seq_idx) covering the row as one segment, position_ids restarting: every start compared
    code, rep = out["one_segment"]
    assert code == 4 and _ids(rep) == ["packing-kernel-misses-boundary"] * 2 + ["packing-segment-mixed"]
    assert rep["batch"]["segments"] == [[0, 40], [40, 110], [110, 140]]
    assert rep["batch"]["segments_from"] == "every boundary source"

    # the positive control as the job's own batch: boundaries removed, one sequence to every kernel
    code, rep = out["removed"]
    assert code == 0 and _ids(rep) == ["packing-segments-match"] and len(rep["segments"]) == 1
