"""The controls of a timed ratio (verify --step, verify --benchmark): the A/A noise band and a known injected
slowdown decide whether a speedup may be claimed (kernelcheck/verify/timing_controls.py)."""

from __future__ import annotations

import pytest

from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Severity
from kernelcheck.report.live_details import BenchmarkPass, BenchmarkRan, PathTimed
from kernelcheck.verify import bench, timing_controls
from kernelcheck.verify.timing_controls import decide


def _timed(ms: float) -> PathTimed:
    return PathTimed(ms, 5, 0, 10, None, False, [])


def test_a_quiet_measurement_detects_the_injected_slowdown_and_decides_a_real_speedup() -> None:
    c = decide(10.0, [10.1, 9.9, 10.0], [15.0, 15.1, 14.9], 0.5, 5.0)
    assert c.detected and c.aa_ratio == 1.0 and c.noise_band == 0.02  # the floor
    assert c.measured_slowdown == 0.49  # the median of the rounds' slowed / plain
    assert c.decides(3.7) and c.decides(0.5)  # faster, or slower: both outside the band
    assert not c.decides(1.01)  # inside the band: not claimed
    assert not c.decides(None)


def test_a_tiny_injected_slowdown_is_not_told_apart_and_decides_nothing() -> None:
    c = decide(10.0, [10.0, 10.0, 10.0], [10.01, 10.01, 10.01], 0.001, 0.01)
    assert not c.detected
    assert not c.decides(5.0)  # even a large ratio: the measurement showed it cannot see a slowdown


def test_huge_noise_widens_the_band_past_the_injected_slowdown() -> None:
    c = decide(10.0, [30.0, 5.0, 20.0], [45.0, 7.5, 30.0], 0.5, 5.0)
    assert c.aa_ratio == 2.0 and c.noise_band == 2.0
    assert not c.detected and not c.decides(3.0)


def test_a_slowdown_far_beyond_the_injected_one_is_not_the_control_detected() -> None:
    """The positive control must be seen as slower by about the injected amount, not by anything."""
    c = decide(10.0, [10.0, 10.0, 10.0], [40.0, 40.0, 40.0], 0.5, 5.0)
    assert c.measured_slowdown == 3.0 and not c.detected


def test_measure_runs_both_controls_on_a_real_module_and_sees_the_injected_delay() -> None:
    import time

    import torch

    class Work(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t = time.perf_counter()
            while time.perf_counter() - t < 0.02:  # 20 ms of real work per call
                x = torch.tanh(x)
            return x

    mod, x = Work(), torch.ones(8)

    def baseline() -> float:  # the path's own timing, as the callers measure it before the controls
        times = []
        for _ in range(3):
            t = time.perf_counter()
            mod(x)
            times.append((time.perf_counter() - t) * 1000)
        return sorted(times)[1]

    base = baseline()
    c = timing_controls.measure(lambda: mod(x), lambda: None, mod, base, 0.5, 3)
    assert c.repeats == 3 and c.injected_ms == pytest.approx(base / 2, abs=1e-3)
    assert c.detected and 0.25 < c.measured_slowdown < 1.0, c
    assert not mod._forward_hooks  # the hook is gone after the control
    tiny = timing_controls.measure(lambda: mod(x), lambda: None, mod, baseline(), 0.0, 3)
    assert not tiny.detected and not tiny.decides(2.0)


def test_the_slowdown_setting_is_a_percentage_and_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(timing_controls.SLOWDOWN_SETTING, raising=False)
    assert timing_controls.fraction(0.5) == 0.5
    monkeypatch.setenv(timing_controls.SLOWDOWN_SETTING, "25")
    assert timing_controls.fraction(0.5) == 0.25
    monkeypatch.setenv(timing_controls.SLOWDOWN_SETTING, "0")
    with pytest.raises(BadInput):
        timing_controls.fraction(0.5)


def _pass(ratio: float, c: timing_controls.TimingControls) -> BenchmarkPass:
    claimed = ratio if c.decides(ratio) else None
    return BenchmarkPass(_timed(10.0), _timed(10.0 * ratio), claimed, None, 1.0, controls=c, ratio=ratio)


def test_a_benchmark_pass_carries_both_controls_and_claims_only_a_decided_ratio() -> None:
    good = decide(10.0, [10.0] * 3, [15.0] * 3, 0.5, 5.0)
    bad = decide(10.0, [10.0] * 3, [10.0] * 3, 0.5, 5.0)
    bm = BenchmarkRan("Qwen3_5GatedDeltaNet", 64, {"forward": _pass(6.4, good), "forward+backward": _pass(1.01, good),
                                                  "other": _pass(6.4, bad)}, "forward")
    js = bm.to_json()
    assert js["speedup"] == 6.4 and js["controls"]["decided"] is True and js["controls"]["detected"] is True
    assert js["controls"]["aa_ratio"] == 1.0 and js["controls"]["measured_slowdown"] == 0.5
    fb = js["passes"]["forward+backward"]
    assert "speedup" not in fb and fb["controls"]["ratio"] == 1.01 and fb["controls"]["decided"] is False
    assert BenchmarkPass.from_json(fb) == bm.passes["forward+backward"]  # reads back typed
    found = {(f.message.split(":")[0], f.severity) for f in bench.control_findings(bm)}
    assert found == {("Qwen3_5GatedDeltaNet forward+backward", Severity.INFO),
                     ("Qwen3_5GatedDeltaNet other", Severity.FALLBACK)}
    assert {f.id for f in bench.control_findings(bm)} == {"benchmark-control-cannot-decide"}


def test_the_controls_json_follows_the_verify_schema() -> None:
    import jsonschema

    from kernelcheck import schemas

    schema = schemas.load("verify")
    c = decide(10.0, [10.0] * 3, [15.0] * 3, 0.5, 5.0)
    sub = {"$defs": schema["$defs"], **schema["properties"]["step"]}
    jsonschema.Draft202012Validator(sub).validate({"controls": {**c.to_json(), "ratio": 1.01, "decided": False}})
    with pytest.raises(jsonschema.ValidationError):  # the section's own keys are required
        jsonschema.Draft202012Validator(sub).validate({"controls": c.to_json()})


def test_the_h100_step_keeps_its_speedup_only_where_its_controls_decide_it() -> None:
    """The H100's real `verify --step` section (docs/measurements/2026-12-05-h100-typed-live-5297a57, 3.21x) with
    controls: a detected slowdown keeps the speedup, its kernel ratio and projected speedup; a missed one (or a
    noise band wider than the ratio) drops all three, keeps the ratio measured, and says so in a finding."""
    import json
    from pathlib import Path

    from kernelcheck.report.live import ControlsLine, SpeedupLine
    from kernelcheck.report.model import Report
    from kernelcheck.verify import step as step_mod

    path = Path(__file__).resolve().parents[2] / "docs/measurements/2026-12-05-h100-typed-live-5297a57"
    sec = Report.from_json(json.loads((path / "verify-step-h100.json").read_text())).step
    assert sec is not None and sec.speedup == 3.21 and sec.projection.projected_speedup is not None
    fast_ms = 1000.0
    seen = step_mod.with_controls(sec, decide(fast_ms, [fast_ms] * 3, [1.5 * fast_ms] * 3, 0.5, fast_ms / 2))
    assert seen.speedup == 3.21 and seen.ratio == 3.21 and seen.projection.projected_speedup is not None
    assert step_mod.control_findings(seen) == []
    items = step_mod.live_items(seen, verbose=True)
    assert any(isinstance(i, SpeedupLine) for i in items) and any(isinstance(i, ControlsLine) for i in items)
    missed = step_mod.with_controls(sec, decide(fast_ms, [fast_ms] * 3, [fast_ms] * 3, 0.5, fast_ms / 2))
    assert missed.speedup is None and missed.kernel_ratio is None and missed.ratio == 3.21
    assert missed.projection.projected_speedup is None
    js = missed.to_json()
    assert "speedup" not in js and js["controls"]["decided"] is False and js["controls"]["ratio"] == 3.21
    assert [(f.id, f.severity) for f in step_mod.control_findings(missed)] == [
        ("step-control-cannot-decide", Severity.FALLBACK)]
    assert not any(isinstance(i, SpeedupLine) for i in step_mod.live_items(missed, verbose=True))
    noisy = step_mod.with_controls(sec, decide(fast_ms, [4.0 * fast_ms] * 3, [6.0 * fast_ms] * 3, 0.5, fast_ms / 2))
    assert noisy.controls is not None and noisy.controls.noise_band == 6.0 and noisy.speedup is None
    assert [f.id for f in step_mod.control_findings(noisy)] == ["step-control-cannot-decide"]
    assert type(sec).from_json(js) == missed  # reads back typed
