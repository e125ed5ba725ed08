"""verify --step: a whole training step on both paths, each in its own process, projected to the full model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.report.step import Failed, Projection
from kernelcheck.trace import analysis as tr
from kernelcheck.verify import projection
from tests.unit.test_report_readback import rendered

ROOT = Path(__file__).resolve().parents[2]


def _result(step_ms: float, prof_ms: float, opt_ms: float) -> dict:
    """A worker result as step_worker writes it: 3 GDN + 1 attention built, 48 + 16 in the real model."""
    return {
        "step_ms": step_ms, "tokens": 8192, "parameters": 1000,
        "layers": ["linear_attention"] * 3 + ["full_attention"],
        "full_layer_types": {"linear_attention": 48, "full_attention": 16},
        "parameters_per_layer": {"linear_attention": 200.0, "full_attention": 100.0},
        "trace": {"profiled_steps": 2, "profiled_step_ms": prof_ms},
        "breakdown": {"profiled_steps": 2, "phases": {"optimizer": {"ms": 2 * opt_ms}},
                      "layer_types": {
                          "linear_attention": {"layers": 3, "forward": {"cost_ms": 2 * 3 * 10.0},
                                               "backward": {"cost_ms": 2 * 3 * 20.0}},
                          "full_attention": {"layers": 1, "forward": {"cost_ms": 2 * 5.0},
                                             "backward": {"cost_ms": 2 * 10.0}}}},
    }


def test_the_projection_adds_the_missing_layers_at_their_measured_cost_and_keeps_the_head_once():
    # profiled step == timed step: no scaling. GDN layer: 10 + 20 ms + 200/1000 of a 10 ms optimizer step.
    p = projection.project(_result(step_ms=200.0, prof_ms=200.0, opt_ms=10.0))
    assert p["per_layer"]["linear_attention"] == {"layer_ms": 30.0, "optimizer_ms": 2.0, "total_ms": 32.0,
                                                  "spread_ms": [32.0, 32.0]}
    assert p["per_layer"]["full_attention"] == {"layer_ms": 15.0, "optimizer_ms": 1.0, "total_ms": 16.0,
                                                "spread_ms": [16.0, 16.0]}
    assert p["rest_ms"] == pytest.approx(200.0 - 3 * 32.0 - 16.0)
    assert p["projected_step_ms"] == pytest.approx(88.0 + 48 * 32.0 + 16 * 16.0)
    assert p["projected_tokens_per_s"] == pytest.approx(8192 / p["projected_step_ms"] * 1000, rel=1e-3)


def test_profiler_overhead_is_scaled_out_and_both_paths_give_a_projected_speedup():
    fast = _result(step_ms=100.0, prof_ms=200.0, opt_ms=10.0)  # profiled 2x slower: costs halve
    ref = _result(step_ms=400.0, prof_ms=200.0, opt_ms=10.0)  # profiled 2x faster (impossible but simple)
    both = projection.compare(fast, ref)
    assert both["fast"]["per_layer"]["linear_attention"]["total_ms"] == pytest.approx(16.0)
    assert both["reference"]["per_layer"]["linear_attention"]["total_ms"] == pytest.approx(64.0)
    assert both["projected_speedup"] == pytest.approx(
        both["reference"]["projected_step_ms"] / both["fast"]["projected_step_ms"], rel=1e-2)
    assert "measured step" in both["method"]


def test_on_a_gpu_the_optimizer_share_is_its_kernel_time_not_the_cpu_waiting_for_the_queue():
    r = _result(step_ms=200.0, prof_ms=200.0, opt_ms=40.0)  # CPU 40 ms per step in the optimizer range
    r["breakdown"]["phases"]["optimizer"]["gpu_ms"] = 2 * 10.0  # its kernels: 10 ms per step
    assert projection.project(r)["per_layer"]["linear_attention"]["optimizer_ms"] == pytest.approx(2.0)


def test_a_layer_type_that_was_not_built_cannot_be_projected():
    r = _result(200.0, 200.0, 10.0)
    del r["breakdown"]["layer_types"]["full_attention"]
    got = projection.project(r)
    assert got["missing_layer_types"] == ["full_attention"] and got["error"]
    typed = Projection.from_json(projection.compare(r, r))  # read back typed, as the report holds it
    assert isinstance(typed.fast, Failed) and typed.fast.missing_layer_types == ("full_attention",)
    assert typed.to_json()["fast"] == got and typed.projected_speedup is None


@pytest.fixture(scope="module")
def step_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("step")
    proc = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--step",
                           "--tokens", "32", "--json", "--trace-dir", str(out), "--junit", str(out / "step.xml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    return proc, json.loads(proc.stdout), out


def test_the_junit_file_carries_the_step_numbers_and_fails_as_the_exit_code_says(step_run):
    import xml.etree.ElementTree as ET

    _, rep, out = step_run
    root = ET.parse(out / "step.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    step = rep["step"]
    assert float(props["step.fast.step_ms"]) == step["paths"]["fast"]["step_ms"]
    assert float(props["step.reference.tokens_per_s"]) == step["paths"]["reference"]["tokens_per_s"]
    # both paths ran the torch code on this CPU: no speedup or projection to plot, no cache state
    assert "step.speedup" not in props and "step.projected_speedup" not in props and "speedup" not in step
    assert props["step.triton_cache"] == "none" and props["step.tokens"] == "32"
    assert len(list(root.iter("failure"))) > 0  # exit 3 on this CPU: the dashboard is red too
    assert "whole training step" in "".join(e.text or "" for e in root.iter("system-out"))


def test_step_on_cpu_runs_both_paths_in_their_own_processes_with_consistent_numbers(step_run):
    proc, rep, _ = step_run
    assert proc.returncode == rep["exit_code"] == 3  # the static part: no fla/causal-conv1d on this CPU
    assert "Traceback" not in proc.stderr
    step = rep["step"]
    assert step["shape"] == "tiny" and step["tokens"] == 32 and step["checkpointing"] is True
    for name in ("fast", "reference"):
        p = step["paths"][name]
        assert p["layers"] == ["linear_attention"] * 3 + ["full_attention"]  # one full period of the pattern
        assert p["step_ms"] > 0 and p["tokens_per_s"] == pytest.approx(32 / p["step_ms"] * 1000, rel=1e-2)
        assert p["kernels_per_step"] == 0 and p["cpu_ops_per_step"] > 1000  # CPU: no kernels, real ops
        assert p["peak_memory_bytes"] > 0
        assert set(p["phases"]) == {"forward", "backward", "optimizer"}
        assert set(p["layer_types"]) >= {"linear_attention", "full_attention"}
        # every layer has its forward and its backward range in each of the 2 profiled steps, with checkpointing
        # on (a recompute opens none: the backward range holds it, and it is dearer than the forward)
        for typ, n in (("linear_attention", 3), ("full_attention", 1)):
            lt = p["layer_types"][typ]
            assert lt["forward"]["ranges"] == lt["backward"]["ranges"] == 2 * n, (typ, lt)
            assert 0 < lt["forward"]["cost_ms"] < lt["backward"]["cost_ms"], (typ, lt)
        assert p["layer_types"].get("_recompute_ranges", 0) == 0
        assert any("torch_chunk_gated_delta_rule" in i for i in p["implementations"])
    # both paths run the same torch code on a CPU: the same ops per step
    assert step["paths"]["fast"]["cpu_ops_per_step"] == pytest.approx(
        step["paths"]["reference"]["cpu_ops_per_step"], rel=0.02)
    # the same implementations on both paths: what was measured, and no speedup, projection or cache claim
    assert step["same_path"] is True and "speedup" not in step and "kernel_ratio" not in step
    assert sorted(step["paths"]["fast"]["implementations"]) == sorted(step["paths"]["reference"]["implementations"])
    assert step["cost"]["total_s"] > 0 and step["cost"]["fast_first_step_s"] > 0
    tc = step["cost"]["triton_cache"]  # no fast path: no Triton cache to speak of
    assert tc["state"] == "none" and tc["first_step_s"] > 0  # (entries_added: the shared cache, not this run)
    # the two workers overlap only where no device work runs: the reference imports while the bound path
    # runs, and starts its steps only after the bound path has finished
    fc, rc = (step["paths"][p]["cost"] for p in ("fast", "reference"))
    assert rc["started_at"] < fc["finished_at"] <= rc["gate_passed_at"]
    assert list(fc) == ["import_s", "build_s", "first_step_s", "total_s", "started_at", "gate_passed_at",
                        "finished_at", "process_s"]  # the worker's keys, then the parent's: report/step.WorkerCost
    ids = {f["id"] for f in rep["findings"]}
    assert "verify-cpu" in ids and "advice-fla" in ids  # transformers says flash-linear-attention: reconciled


def test_no_projection_where_both_paths_ran_the_same_code(step_run):
    """On this CPU both paths are the torch code: a projection of either to 64 layers would be this machine's
    torch speed dressed as the model's (the arithmetic itself: the projection tests above)."""
    _, rep, _ = step_run
    proj = rep["step"]["projection"]
    assert "projected_speedup" not in proj
    for name in ("fast", "reference"):
        assert proj[name] == {"error": "both paths ran the same implementations: nothing to project"}


CONTROL_KEYS = ["repeats", "baseline_ms", "repeat_ms", "aa_ratio", "noise_band", "injected_fraction", "injected_ms",
                "slowed_ms", "measured_slowdown", "detected", "expected_slowdown", "ratio", "decided"]


def test_the_step_ratio_carries_its_controls_run_on_the_bound_path(step_run):
    """The bound path timed again (A/A: the noise band) and with a synchronous delay of half its step time added
    by a forward hook (the positive control), in its own process on its own weights; the ratio is claimed only
    when the delay is seen and the ratio lies outside the band (never here: both paths are the torch code)."""
    _, rep, _ = step_run
    step = rep["step"]
    c = step["controls"]
    assert list(c) == CONTROL_KEYS
    assert c["repeats"] == 3 and c["injected_fraction"] == 0.5
    assert c["baseline_ms"] == step["paths"]["fast"]["step_ms"]  # the bound path's own timing
    assert c["injected_ms"] == pytest.approx(c["baseline_ms"] / 2, rel=1e-3)
    assert c["slowed_ms"] > c["repeat_ms"] and c["measured_slowdown"] > 0  # the delay was really in the step
    assert c["noise_band"] >= 0.02 and c["aa_ratio"] > 0
    assert c["ratio"] == pytest.approx(step["paths"]["reference"]["step_ms"] / c["baseline_ms"], abs=0.01)
    assert c["decided"] is False and "speedup" not in step  # the same code twice: nothing claimed
    ids = {(f["id"], f["severity"]) for f in rep["findings"]}
    # a positive control this loaded machine did not see is said, never a silent pass
    assert (("step-control-cannot-decide", "fallback") in ids) is (not c["detected"])


def test_a_slowdown_too_small_to_see_makes_the_step_say_it_cannot_decide(tmp_path):
    """KERNELCHECK_CONTROL_SLOWDOWN=1: a 1 % delay sits inside the 2 % noise floor, so the positive control is
    missed: `step-control-cannot-decide` (fallback), no speedup or projected speedup."""
    proc = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--step",
                           "--tokens", "16", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "KERNELCHECK_CONTROL_SLOWDOWN": "1"})
    rep = json.loads(proc.stdout)
    assert proc.returncode == rep["exit_code"] == 3, proc.stderr
    c = rep["step"]["controls"]
    assert c["injected_fraction"] == 0.01 and c["detected"] is False and c["decided"] is False
    found = [f for f in rep["findings"] if f["id"] == "step-control-cannot-decide"]
    assert [f["severity"] for f in found] == ["fallback"]
    assert "speedup" not in rep["step"] and "projected_speedup" not in rep["step"]["projection"]


def test_step_text_shows_numbers_and_keeps_profiler_noise_out_of_stderr(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--step",
                           "--tokens", "16", "-o", str(tmp_path / "r.json")], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**os.environ, "COLUMNS": "100"})  # piped: the width rendered() wraps to
    assert proc.returncode == 3, proc.stderr
    rep = json.loads((tmp_path / "r.json").read_text())  # the same run's values
    step = rep["step"]
    assert step["paths"]["fast"]["tokens_per_s"] > 0 and "projected_tokens_per_s" not in step["projection"]["fast"]
    assert step["cost"]["triton_cache"]["state"] == "none"  # no fast path on a CPU
    assert step["same_path"] is True and "speedup" not in step
    assert "USDT" not in proc.stderr and "profiler_start" not in proc.stderr
    assert "install `flash-linear-attention`" not in proc.stderr
    # the text is the renderers' from those values (their words: tests/unit/test_report_readback.py's samples)
    assert proc.stdout == rendered(rep)


def test_the_whole_step_trace_it_keeps_reads_back_with_phases_and_layer_types(step_run):
    _, rep, out = step_run
    path = Path(rep["step"]["paths"]["fast"]["trace_file"])
    assert path.parent == out and path.exists()
    an = tr.analyze_file(path, m=matrix.load())
    assert len(an.steps) == 2
    assert set(an.breakdown["phases"]) == {"forward", "backward", "optimizer"}
    # the whole trace's CPU span is never shorter than a step's
    assert an.summary.cpu_span_us >= max(s.cpu_span_us for s in an.steps)


@pytest.mark.parametrize("args, words", [
    (["--layers", "0"], "--layers must be at least 1"),
    (["--layers", "65"], "has only 64 layers"),
    (["--mode", "infer"], "use --mode train"),
])
def test_bad_step_arguments_are_exit_2_with_a_message(args, words):
    proc = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", "--model", "qwen3.8-27b", "--step", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
