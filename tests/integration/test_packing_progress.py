"""`verify --packing --batch` on a row of many segments says which segment it runs, on stderr, while stdout keeps
the same JSON: each segment runs alone forward and backward (and again for a control), which takes minutes on
a long row, and a CI log otherwise shows nothing for that long.

A real collator's batch (DataCollatorWithFlattening) through the real tiny Qwen3.5 layers on the CPU, in a
process of its own (stderr is a pipe, as in a CI log), with KERNELCHECK_PROGRESS_EVERY=0.1 so the lines come
in a few seconds of work instead of every 30 s; the same command with progress off gives the same JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SEGMENTS = 40  # enough that the segments run for a second or more: several 0.1 s ticks land among them


def _verify(pt: Path, progress: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELCHECK_PROGRESS": progress,
           "KERNELCHECK_PROGRESS_EVERY": "0.1"}
    return subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--packing",
                           "--batch", str(pt), "--json"], capture_output=True, text=True, env=env, timeout=600)


def test_a_many_segment_row_says_which_segment_runs_and_keeps_stdout_the_json(tmp_path: Path):
    from transformers import DataCollatorWithFlattening

    seqs = [[1 + (i * 7 + j) % 50 for j in range(3 + i % 4)] for i in range(SEGMENTS)]
    pt = tmp_path / "many.pt"
    torch.save(dict(DataCollatorWithFlattening()([{"input_ids": s} for s in seqs])), pt)

    on = _verify(pt, "1")
    assert on.returncode == 4, on.stderr[-2000:]
    lines = on.stderr.splitlines()
    said = [int(m.group(1)) for ln in lines
            if (m := re.fullmatch(rf"kernelcheck verify --packing \(still working, \d+ s; segment (\d+) of "
                                  rf"{SEGMENTS} run alone \(fwd\+bwd\)\)", ln))]
    assert said and said == sorted(said) and said[-1] <= SEGMENTS, on.stderr[-3000:]
    assert all(len(ln) <= 100 for ln in lines if ln.startswith("kernelcheck verify --packing"))
    assert "\r" not in on.stderr  # a log, not a terminal: plain lines

    off = _verify(pt, "0")
    assert off.returncode == 4 and "kernelcheck verify --packing" not in off.stderr
    rep_on, rep_off = json.loads(on.stdout), json.loads(off.stdout)  # stdout is the JSON alone, both ways
    assert [s[1] - s[0] for s in rep_on["batch"]["segments"]] == [len(s) for s in seqs]
    assert rep_on == rep_off


def test_the_packing_modes_run_says_which_mode_and_lengths_run():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELCHECK_PROGRESS": "1", "KERNELCHECK_PROGRESS_EVERY": "0.1"}
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--packing",
                          "--json"], capture_output=True, text=True, env=env, timeout=600)
    rep = json.loads(res.stdout)  # stdout is the JSON alone
    assert res.returncode == rep["exit_code"], res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("kernelcheck verify --packing")]
    said = {m.group(1, 2) for ln in lines
            if (m := re.search(r"; mode (\d) of 3 \((\w+)\), \d+\+\d+ tokens\)$", ln))}
    # a mode that runs under 0.1 s may fall between two lines: at least one is said, and each said is a mode that ran
    assert {mode for _, mode in said} <= {r["mode"] for r in rep["packing"]} and len(said) >= 1, res.stderr[-3000:]
    assert all(len(ln) <= 100 for ln in lines)
