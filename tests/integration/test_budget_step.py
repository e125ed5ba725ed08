"""verify --step --budget: each path's profiled step read once more with the step budget, under the report's
`budget` key (schema kernelcheck.budget/1), without changing the verdict. On this CPU machine the traces hold no
kernel: the budget says so (no GPU time to budget) instead of inventing floors; on a GPU,
benchmarks/gpu/gpu_budget.sh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from kernelcheck import schemas

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_step_budget_on_a_cpu_names_both_paths_and_says_there_is_no_gpu_time(tmp_path: Path) -> None:
    svg = tmp_path / "b.svg"
    proc = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--step",
                           "--budget", "--tokens", "32", "--json", "--trace-dir", str(tmp_path), "--budget-svg",
                           str(svg)], capture_output=True, text=True, cwd=ROOT, timeout=900)
    rep = json.loads(proc.stdout)
    assert proc.returncode == rep["exit_code"] == 3, proc.stderr[-2000:]  # the static part, as without --budget
    sec = rep["budget"]
    jsonschema.Draft202012Validator(schemas.load("budget")).validate(sec)
    assert set(sec["paths"]) == {"fast", "reference"}
    for b in sec["paths"].values():
        assert b["steps"] == [] and b["steps_without_gpu_activity"]
        assert any("no GPU activity" in n for n in b["notes"])
        assert b["model"]["layers"] == {"full_attention": 1, "linear_attention": 3} and b["model"]["tokens"] == 32
        assert Path(b["source"]).parent == tmp_path
    assert svg.read_text().startswith("<svg")
