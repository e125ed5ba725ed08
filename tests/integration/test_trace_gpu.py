"""kernelcheck trace on REAL GPU traces: one Qwen3.8-27B Gated DeltaNet layer recorded on an H200 by
benchmarks/record_gdn_traces.py, once with fla + causal-conv1d (gdn_fast.json.gz) and once with both
hidden from transformers (gdn_fallback.json.gz). They live in tests/data/gpu/ (a CPU cannot record them).

These tests fail, rather than skip, when the traces are missing: the GPU verdict must be proven on them.
Record them with (on the GPU machine, fla-core and causal-conv1d importable):
    python benchmarks/record_gdn_traces.py --out tests/data/gpu
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.report.model import Report
from kernelcheck.trace import analysis as tr
from tests import envs

M = matrix.load()  # the shipped matrix: its signatures judge each trace

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"
FAST = GPU / "gdn_fast.json.gz"
FALLBACK = GPU / "gdn_fallback.json.gz"


def _need(p: Path) -> Path:
    if not p.exists():
        pytest.fail(f"{p} is missing: record it on the GPU machine with "
                    "`python benchmarks/record_gdn_traces.py --out tests/data/gpu` and commit it (see docs/trace.md).")
    return p


def test_fallback_trace_names_the_missing_packages():
    code, rep = envs.run_json(["trace", str(_need(FALLBACK))])
    assert code == 3, rep["findings"]
    assert rep["verdict"] == "fallback"
    t = rep["trace"]
    assert t["diagnosis"] == "fallback" and t["cpu_only"] is False
    assert t["missing_packages"] == ["fla-core", "causal-conv1d"]
    assert any("H200" in (g["name"] or "") for g in t["gpus"])
    ids = {f["id"] for f in rep["findings"]}
    assert {"fla-torch-fallback", "causal-conv1d-torch-fallback"} <= ids
    s = rep["summary"]
    assert s["kernels"] > 300  # the torch path: hundreds to thousands of small kernels per layer
    assert rep["steps"] and all(st["kernels"] > 0 for st in rep["steps"])
    res = envs.run(["trace", str(FALLBACK)])
    assert res.returncode == 3
    # what a person reads last: this report's verdict line, naming the missing packages (worded by the renderer)
    assert res.stdout.splitlines()[-1] == tr.render_text(Report.from_json(rep)).splitlines()[-1]


def test_fast_trace_is_not_a_fallback():
    code, rep = envs.run_json(["trace", str(_need(FAST))])
    t = rep["trace"]
    assert t["missing_packages"] == [] and t["fallback_signatures"] == []
    assert set(t["fast_packages"]) >= {"fla", "causal_conv1d"}
    ids = {f["id"] for f in rep["findings"]}
    assert "fla-kernels-ran" in ids and "causal-conv1d-kernels-ran" in ids
    assert "fla-torch-fallback" not in ids and "causal-conv1d-torch-fallback" not in ids
    assert code in (0, 3)
    if code == 3:  # only launch-bound may make a fast step slow
        assert t["diagnosis"] == "launch-bound"


def test_fast_and_fallback_apart_in_numbers():
    fast, slow = tr.analyze_file(_need(FAST), m=M), tr.analyze_file(_need(FALLBACK), m=M)
    assert fast.diagnosis != "fallback" and slow.diagnosis == "fallback"
    # the same layer and input: the torch path launches many times more kernels and keeps the GPU less busy
    assert slow.summary.kernels > 5 * fast.summary.kernels
    assert (slow.summary.busy_fraction or 0) < (fast.summary.busy_fraction or 1)
    assert slow.summary.median_kernel_us < fast.summary.median_kernel_us
    names = set(fast.summary.kernel_names)
    assert any(n.startswith("chunk_gated_delta_rule_fwd_kernel_h") for n in names), sorted(names)[:20]
    assert any("causal_conv1d" in n for n in names)
    assert not any("causal_conv1d" in n or n.startswith("chunk_gated_delta_rule") for n in slow.summary.kernel_names)
