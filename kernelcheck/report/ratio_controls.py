"""The controls of a timed ratio as reported (verify --step's `step.controls`, verify --benchmark's per pass
`controls`); measured and decided in kernelcheck/verify/timing_controls.py."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcheck.core.codec import Fields


@dataclass(frozen=True)
class TimingControls(Fields):
    """Both controls of one timed ratio (kernelcheck/verify/timing_controls.py), in ms and fractions."""

    repeats: int
    baseline_ms: float
    repeat_ms: float
    aa_ratio: float
    noise_band: float
    injected_fraction: float
    injected_ms: float
    slowed_ms: float
    measured_slowdown: float
    detected: bool
    expected_slowdown: float = 0.0  # injected_ms over repeat_ms: what the positive control should show

    def decides(self, ratio: float | None) -> bool:
        """Whether `ratio` (reference over bound path) may be claimed: the positive control was detected and the
        ratio lies outside the noise band."""
        return ratio is not None and self.detected and abs(ratio - 1.0) > self.noise_band
