"""The controls of a timed ratio (`verify --step`, `verify --benchmark`): what the bound path's speedup over the
torch reference may claim.

A ratio of two timings means nothing until the same run has shown how far apart two timings of the same code
fall (the noise) and that a known slowdown is seen as one. After the bound path's own timing (its `baseline`),
in the same process, on the same weights and inputs, `repeats` rounds each time the bound path once more:
- negative control (A/A): the same call, timed the same way (`repeat_ms`, the median of the rounds); its ratio
  to the baseline (`aa_ratio`) must be about 1. The noise band around 1 is `max(2 |aa_ratio - 1|, FLOOR)`;
- positive control: the same call with a forward hook on the timed module that synchronises and sleeps
  `injected_fraction` of the baseline (a delay of known size); `measured_slowdown` is the median over the rounds
  of (slowed / plain) - 1, each slowed call next to its plain one (drift cancels). It is detected when it lies
  outside the noise band and within a factor `ABOUT` of `expected_slowdown`, the delay over the rounds' plain
  time.
The ratio is claimed (the "N x faster" line, the projected speedup) only when the positive control is detected
and the ratio lies outside the noise band; otherwise the report says this measurement cannot decide
(`step-control-cannot-decide`, `benchmark-control-cannot-decide`).

Cost: 2 x `repeats` more calls of the bound path (the shorter timing), plus the injected delays:
`repeats` x `injected_fraction` x the bound path's time (matrix/verify.toml: 3 rounds, 50 %: 7.5 bound-path calls).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from kernelcheck.core import settings
from kernelcheck.report.ratio_controls import TimingControls

FLOOR = 0.02  # the narrowest noise band: a ratio within 2 % of 1 is never claimed
ABOUT = 2.0  # the positive control's measured slowdown must be within this factor of the injected one
SLOWDOWN_SETTING = "KERNELCHECK_CONTROL_SLOWDOWN"  # percent of the bound path's time injected (test hook)
__all__ = ["TimingControls", "decide", "fraction", "measure", "why_undecided"]


def fraction(default: float) -> float:
    """The injected slowdown as a fraction: KERNELCHECK_CONTROL_SLOWDOWN (percent) or the matrix's `default`."""
    pct = settings.count(SLOWDOWN_SETTING)
    return default if pct is None else pct / 100.0


def decide(baseline_ms: float, plain_ms: list[float], slowed_ms: list[float], injected_fraction: float,
           injected_ms: float) -> TimingControls:
    """The controls from the timings: the rounds' plain and slowed calls (ms, pairwise) against the baseline."""
    repeat = statistics.median(plain_ms)
    aa = repeat / baseline_ms if baseline_ms > 0 else float("inf")
    band = max(2.0 * abs(aa - 1.0), FLOOR)
    slowdown = statistics.median([s / p for s, p in zip(slowed_ms, plain_ms, strict=True) if p > 0] or [1.0]) - 1.0
    expected = injected_ms / repeat if repeat > 0 else 0.0  # the delay against the path's time in these rounds
    detected = slowdown > band and expected / ABOUT <= slowdown <= expected * ABOUT
    return TimingControls(len(plain_ms), round(baseline_ms, 3), round(repeat, 3), round(aa, 3), round(band, 3),
                          round(injected_fraction, 3), round(injected_ms, 3), round(statistics.median(slowed_ms), 3),
                          round(slowdown, 3), detected, round(expected, 3))


def measure(once: Callable[[], object], sync: Callable[[], None], module: Any, baseline_ms: float,
            injected_fraction: float, repeats: int) -> TimingControls:
    """Run both controls on `once` (one synchronised call of the bound path whose median was `baseline_ms`): per
    round one plain call, then one with a forward hook on `module` that synchronises and sleeps
    `injected_fraction` of the baseline."""
    delay_s = injected_fraction * baseline_ms / 1000.0

    def slow(*_a: Any) -> None:
        sync()
        time.sleep(delay_s)

    def timed() -> float:
        t = time.perf_counter()
        once()
        sync()
        return (time.perf_counter() - t) * 1000.0

    plain: list[float] = []
    slowed: list[float] = []
    for _ in range(max(1, repeats)):
        plain.append(timed())
        handle = module.register_forward_hook(slow)
        try:
            slowed.append(timed())
        finally:
            handle.remove()
    return decide(baseline_ms, plain, slowed, injected_fraction, delay_s * 1000.0)


def why_undecided(c: TimingControls, ratio: float | None) -> str:
    """In words, why `ratio` is not claimed (c.decides(ratio) is False)."""
    if not c.detected:
        return (f"a known slowdown of {c.injected_fraction:.0%} ({c.injected_ms} ms injected) was measured as "
                f"{c.measured_slowdown:+.0%}, against a noise band of +/-{c.noise_band:.0%} (the same path timed "
                f"twice: {c.aa_ratio}x)")
    return (f"the ratio {ratio}x lies within the noise band 1 +/- {c.noise_band:.2f} (the same path timed twice: "
            f"{c.aa_ratio}x)")
