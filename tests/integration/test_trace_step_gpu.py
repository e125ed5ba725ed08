"""kernelcheck trace on REAL whole training steps: `kernelcheck verify --model qwen3.8-27b --step --mode train
--tokens 8192` on an H200 (4 real-width layers: 3 Gated DeltaNet + 1 full attention, the real 248k vocabulary
and head, activation checkpointing, fused AdamW), one profiled step per path, recorded by
`benchmarks/gpu/gpu_step.sh step` (docs/measurements/2026-12-03-h200-step-f239ad3/). step-fast: fla-core +
causal-conv1d bound; step-reference: every function forced to transformers' torch reference.

These fail, rather than skip, when the traces are missing: a CPU cannot record them.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests import envs

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"
FAST, REF = GPU / "step-fast.json.gz", GPU / "step-reference.json.gz"


def _need(p: Path) -> Path:
    if not p.exists():
        pytest.fail(f"{p} is missing: record it on the GPU machine with `bash benchmarks/gpu/gpu_step.sh step` "
                    "(traces/step-*.json.gz) and commit it under tests/data/gpu.")
    return p


@pytest.fixture(scope="module")
def fast():
    return envs.run_json(["trace", str(_need(FAST))])


@pytest.fixture(scope="module")
def ref():
    return envs.run_json(["trace", str(_need(REF))])


def test_the_bound_step_is_healthy_and_its_kernels_ran(fast):
    code, rep = fast
    assert code == 0 and rep["verdict"] == "ready", rep["findings"]
    ids = {f["id"] for f in rep["findings"]}
    assert {"fla-kernels-ran", "causal-conv1d-kernels-ran"} <= ids
    assert rep["trace"]["fallback_signatures"] == [] and rep["trace"]["launch_bound_steps"] == []
    assert rep["summary"]["gpu_busy_fraction"] > 0.9


def test_the_reference_step_is_a_fallback_with_many_times_the_kernels(fast, ref):
    code, rep = ref
    assert code == 3 and rep["trace"]["diagnosis"] == "fallback"
    assert rep["trace"]["missing_packages"] == ["fla-core", "causal-conv1d"]
    assert rep["summary"]["kernels"] > 10 * fast[1]["summary"]["kernels"]


@pytest.mark.parametrize("which", ["fast", "ref"])
def test_phases_and_every_layer_type_are_read_from_the_whole_step(which, fast, ref):
    b = (fast if which == "fast" else ref)[1]["breakdown"]
    assert b["marked_by"] == "kernelcheck" and b["profiled_steps"] == 1
    assert set(b["phases"]) == {"forward", "backward", "optimizer"}
    assert all(p["kernels"] > 0 and p["gpu_ms"] > 0 for p in b["phases"].values())
    lt = b["layer_types"]
    assert lt["linear_attention"]["layers"] == 3 and lt["full_attention"]["layers"] == 1
    for typ, n in (("linear_attention", 3), ("full_attention", 1)):
        for pas in ("forward", "backward"):
            e = lt[typ][pas]
            assert e["ranges"] == n and e["kernels"] > 0 and e["gpu_ms"] > 0, (typ, pas, e)
        # the backward holds the checkpoint's recompute: dearer than the forward
        assert lt[typ]["backward"]["gpu_ms"] > lt[typ]["forward"]["gpu_ms"]
    assert lt.get("_recompute_ranges", 0) == 0
    # the layers' kernels are part of the phases' kernels
    layer_kernels = sum(lt[t][p]["kernels"] for t in ("linear_attention", "full_attention")
                        for p in ("forward", "backward"))
    assert layer_kernels <= b["phases"]["forward"]["kernels"] + b["phases"]["backward"]["kernels"]


def test_the_text_explains_the_deep_queue_and_never_shows_a_bare_namespace():
    res = envs.run(["trace", str(_need(FAST))])
    assert res.returncode == 0
    assert "That is GOOD: the GPU never waits for Python." in res.stdout  # wording: renderer test
    # (its phases are values: test_phases_and_every_layer_type_...; their line is worded in test_trace_step.py)
    kernel_lines = [ln for ln in res.stdout.splitlines() if " x " in ln and " ms  " in ln]
    assert kernel_lines and not any(ln.rstrip().endswith("at::native::") for ln in kernel_lines), kernel_lines


def test_the_whole_trace_cpu_span_is_never_shorter_than_the_step(fast, ref):
    for _, rep in (fast, ref):
        assert rep["summary"]["cpu_span_us"] >= max(s["cpu_span_us"] for s in rep["steps"])


def test_annotate_writes_the_findings_into_the_trace_for_perfetto(tmp_path):
    out = tmp_path / "annotated.json.gz"
    res = envs.run(["trace", str(_need(REF)), "--annotate", str(out)])
    assert res.returncode == 3, res.stderr
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    marks = [e for e in events if e.get("ph") == "i" and str(e.get("name", "")).startswith("kernelcheck")]
    assert any("fla-torch-fallback" in json.dumps(e) for e in marks), marks[:3]
