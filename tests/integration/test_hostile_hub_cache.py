"""The issue's repro as a user types it: transformers 5.25 + kernels 0.19.1 read the cached Hub fla build for a
CUDA verdict; a refs file of random bytes, or a damaged tree listing, made every doctor exit 1 (internal error).
Now: a verdict (the load fails: exit 4) and a finding naming the file. The resolver itself, each damage:
tests/unit/test_hostile_hub_cache.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.envs import run_json, site
from tests.kernel_repos import cache_repo

pytestmark = pytest.mark.integration

VARIANTS = ["torch211-cxx11-cu130-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux"]
DOCTOR = ["doctor", "--model", "qwen3.8-27b", "--arch", "9.0", "--hub-device", "cuda"]


@pytest.mark.parametrize("what", ["ref random bytes", "tree files 5"])
def test_doctor_on_a_damaged_cache_entry_says_which_file(tmp_path: Path, what: str) -> None:
    stack = site("transformers==5.25.0", "kernels==0.19.1", deps=True)
    commit = cache_repo(tmp_path / "C", "kernels-community/fla", VARIANTS, versions=(3,))
    base = tmp_path / "C" / "kernels--kernels-community--fla"
    if what == "ref random bytes":
        damaged = base / "refs" / "v3"
        damaged.write_bytes(os.urandom(64))
    else:
        (base / "trees").mkdir()
        damaged = base / "trees" / f"{commit}.json"
        damaged.write_text('{"files": 5}')
    code, rep = run_json(DOCTOR, stack, env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "C")})
    assert code == rep["exit_code"] == 4, rep
    named = [f for f in rep["findings"] if str(damaged) in f["message"]]
    assert named and named[0]["severity"] == "broken" and "chunk_gated_delta_rule" in named[0]["functions"]
