"""Per-layer step costs from the GPU timeline (trace/gpushare.py, trace/phases.py, verify/projection.py),
on hand-written trace events: what a deep queue and a launch-bound layer look like to the attribution."""

from __future__ import annotations

import pytest

from kernelcheck.trace import gpushare, phases
from kernelcheck.verify import projection


def test_an_idle_gap_belongs_to_the_launch_that_ended_it_and_the_shares_add_up_to_the_span():
    got = gpushare.shares([(0.0, 10.0, 1, True), (30.0, 5.0, 2, True), (32.0, 10.0, 3, True)])
    assert (got[1].busy_us, got[1].idle_us) == (10.0, 0.0)
    assert (got[2].busy_us, got[2].idle_us) == (5.0, 20.0)  # the GPU waited 20 us for launch 2
    assert (got[3].busy_us, got[3].idle_us, got[3].kernel_us) == (7.0, 0.0, 10.0)  # overlap counted once
    busy, idle = gpushare.totals(got)
    assert busy + idle == 42.0  # first start to last end


def _ev(cat, name, ts, dur, tid=1, corr=None):
    args = {} if corr is None else {"correlation": corr}
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid, "pid": 0, "args": args}


def _layer_events(cpu_wait: float):
    """Two layers on one step. Layer A launches a 50 us kernel, then its CPU blocks `cpu_wait` us in a
    synchronising call (the queue drains: B's kernels are not its cost); layer B launches 30 us."""
    return [
        _ev("user_annotation", "ProfilerStep#0", 0, 1000),
        _ev("user_annotation", "kernelcheck::layer::full_attention::L0", 10, 5 + cpu_wait),
        _ev("cuda_runtime", "cudaLaunchKernel", 11, 1, corr=1),
        _ev("user_annotation", "kernelcheck::layer::linear_attention::L1", 20 + cpu_wait, 10),
        _ev("cuda_runtime", "cudaLaunchKernel", 21 + cpu_wait, 1, corr=2),
        _ev("kernel", "attn", 12, 50, tid=7, corr=1),
        _ev("kernel", "gdn", 62 + cpu_wait, 30, tid=7, corr=2),
    ]


def test_a_layer_costs_its_kernels_not_the_cpu_time_it_spent_waiting_for_the_queue():
    b = phases.collect(_layer_events(cpu_wait=500.0))
    attn = b["layer_types"]["full_attention"]["forward"]
    assert attn["cpu_ms"] == pytest.approx(0.505) and attn["cost_ms"] == pytest.approx(0.050)
    gdn = b["layer_types"]["linear_attention"]
    # the GPU sat idle from 62 to 562 waiting for L1's launch: that gap is L1's (a launch-bound layer)
    assert gdn["forward"]["idle_ms"] == pytest.approx(0.5) and gdn["forward"]["cost_ms"] == pytest.approx(0.530)
    assert gdn["per_step_ms"] == [pytest.approx(0.530)]
    assert b["cost_by"] == "gpu timeline share" and b["gpu"] == {"busy_ms": 0.08, "idle_ms": 0.5}


def test_without_gpu_events_a_layer_costs_its_cpu_time():
    events = [e for e in _layer_events(cpu_wait=100.0) if e["cat"] != "kernel"]
    b = phases.collect(events)
    assert b["cost_by"] == "cpu time" and b["gpu"] is None
    assert b["layer_types"]["full_attention"]["forward"]["cost_ms"] == pytest.approx(0.105)


def _gpu_result(step_ms: float) -> dict:
    """One GDN layer type whose cost per step is 40 ms of kernels + 60 ms of idle gaps (profiled 2 steps)."""
    lt = {"layers": 1, "per_step_ms": [90.0, 110.0],
          "forward": {"cost_ms": 2 * 30.0, "idle_ms": 2 * 20.0}, "backward": {"cost_ms": 2 * 70.0, "idle_ms": 2 * 40.0}}
    return {"step_ms": step_ms, "tokens": 1000, "parameters": 1000, "layers": ["linear_attention"],
            "full_layer_types": {"linear_attention": 4}, "parameters_per_layer": {"linear_attention": 0.0},
            "trace": {"profiled_steps": 2, "profiled_step_ms": 300.0},
            "breakdown": {"profiled_steps": 2, "gpu": {"busy_ms": 2 * 200.0, "idle_ms": 2 * 100.0},
                          "phases": {}, "layer_types": {"linear_attention": lt}}}


def test_the_profiler_widens_only_the_gaps_so_only_the_idle_part_is_scaled():
    # profiled: 200 busy + 100 idle = 300 ms; unprofiled median 250 ms: the gaps are 50 ms, half of them
    p = projection.project(_gpu_result(step_ms=250.0))
    c = p["per_layer"]["linear_attention"]
    assert c["layer_ms"] == pytest.approx(40.0 + 60.0 * 0.5)
    assert c["spread_ms"] == [pytest.approx(63.0), pytest.approx(77.0)]  # 90 and 110 x 70/100
    assert p["projected_step_ms"] == pytest.approx(250.0 + 3 * 70.0)
    assert p["projected_spread_ms"] == [pytest.approx(250.0 + 3 * 63.0), pytest.approx(250.0 + 3 * 77.0)]


def test_a_step_slower_than_its_profiled_one_never_scales_the_gaps_up():
    c = projection.per_layer_costs(_gpu_result(step_ms=400.0))["linear_attention"]
    assert c["layer_ms"] == pytest.approx(100.0)
