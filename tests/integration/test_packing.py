"""Packing truth table: what doctor decides, checked against real tiny Qwen3.5 runs in each transformers regime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.packing.decide import has_guard, load_facts, section
from tests.envs import TF525, site

ROOT = Path(__file__).resolve().parents[2]
FACTS = load_facts(m=matrix.load())
GDN = ("causal_conv1d_fn", "chunk_gated_delta_rule")

# transformers regime -> the site that holds it (5.25.0 with the kernels 0.19.1 it requires, tests/envs.py TF525)
REGIMES = {"5.17.0": (("transformers==5.17.0",), True), "5.20.2": (("transformers==5.20.2",), False),
           "5.25.0": (TF525, True)}
EXPECT_FLASH_TORCH = {"5.17.0": "mixed", "5.20.2": "raises", "5.25.0": "raises"}


def _site(version: str) -> Path:
    reqs, deps = REGIMES[version]
    return site(*reqs, deps=deps)


@pytest.mark.parametrize("version", list(REGIMES))
def test_guard_is_read_from_the_installed_source(version: str) -> None:
    expect = EXPECT_FLASH_TORCH[version] == "raises"
    assert has_guard(FACTS, _site(version) / "transformers") is expect


@pytest.mark.parametrize("version", list(REGIMES))
def test_measured_truth_table_matches_the_decision(version: str) -> None:
    tf = _site(version)
    env = {**os.environ, "PYTHONPATH": f"{tf}{os.pathsep}{ROOT}", "USE_HUB_KERNELS": "0"}
    res = subprocess.run([sys.executable, "-m", "kernelcheck.verify.packing", "--json"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    measured = {r["mode"]: r for r in json.loads(res.stdout)["results"]}
    assert measured["position_ids"]["outcome"] == "mixed"
    # the hazard is far above rounding (CPU tolerance 1e-3): the GDN layer's own mix, the attention keeps the
    # sequences apart (the training forward has no cache; the old cached forward showed ~0.3)
    assert measured["position_ids"]["max_logit_diff"] > 0.01
    assert measured["position_ids"]["per_layer_type"]["linear_attention"] > 1e-3
    assert measured["flash"]["outcome"] == EXPECT_FLASH_TORCH[version]
    sec = section(dict.fromkeys(GDN, "fallback"), None, FACTS, tf / "transformers")
    assert sec is not None
    decided = {m.mode: m.outcome for m in sec.modes}
    for mode in ("position_ids", "cu_seq_lens", "flash"):
        assert decided[mode] == measured[mode]["outcome"], (mode, measured[mode])


def test_doctor_declared_position_ids_packing_is_broken_for_qwen3_5() -> None:
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    res = CliRunner().invoke(main, ["doctor", "--model", "qwen3.8-27b", "--packing", "position_ids", "--json"])
    rep = json.loads(res.stdout)
    assert res.exit_code == 4 and rep["verdict"] == "broken"
    declared = next(f for f in rep["findings"] if f["id"] == "packing-declared")
    modes = {m["mode"]: m for m in rep["packing"]["modes"]}
    assert declared["severity"] == "broken" and modes["position_ids"]["outcome"] == "mixed"  # sequences mix
    assert "return_seq_idx=True" in declared["fix"]
    assert rep["packing"]["guard_in_source"] is True  # the venv's transformers 5.24 has the guard
    res = CliRunner().invoke(main, ["doctor", "--model", "qwen3.8-27b", "--verbose"])  # info is grouped without it
    lines = [ln for ln in res.output.splitlines() if "[packing" in ln]
    assert len(lines) == 1  # the [packing] finding, in full (its words: tests/unit/test_output_words.py)
