"""The values a trace analysis returns (shared by analysis, verdicts and render)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelcheck.core import decide
from kernelcheck.core.status import Finding, Verdict
from kernelcheck.report.trace import (
    Diagnosis,
    FallbackSignature,
    IdleGaps,
    KernelCount,
    KernelTotal,
    LaunchDelay,
    OpCount,
    StepRow,
)


class BudgetFeed(Protocol):
    """What the analysis' single pass hands a step budget's collector (budget/collect.py), when one is given: the
    CPU ranges and the host's synchronize calls as they are read, then the steps' GPU activities at the end."""

    def cpu_range(self, name: str, ts: float, end: float) -> None: ...

    def cpu_bulk(self, names: list[Any], ts: Sequence[float], end: Sequence[float]) -> None: ...

    def sync(self, ts: float, end: float) -> None: ...

    def sync_bulk(self, names: list[str], ts: Sequence[float], dur: Iterable[float]) -> None: ...

    def steps(self, steps: Sequence[tuple[float, float, str]], by_step: Sequence[list[tuple[int, int]]],
              g_ts: array[float], g_dur: array[float], g_name: array[int], g_corr: array[int],
              launch_end: dict[int, float], name_list: list[str]) -> Sequence[Any]: ...


@dataclass(frozen=True)
class StepStats:
    """What ran in one profiler step (or in the whole trace, for TraceAnalysis.summary).

    Times are microseconds. `gpu_busy_us` is the union of kernel intervals (memcpy/memset excluded: they
    do not keep the SMs busy); `wall_us` runs from the step's start to the later of its CPU end and its
    last GPU activity; `idle_gaps` are the holes between busy intervals inside the GPU span;
    `launch_delay_us` is kernel start minus the end of the runtime/driver call that launched it (matched
    by correlation id), clamped at 0 (a kernel may start before its launch call returns).
    """

    name: str
    cpu_ops: int
    kernels: int
    memcpy: int
    memset: int
    gpu_busy_us: float
    cpu_span_us: float
    gpu_span_us: float
    wall_us: float
    idle_gaps: Mapping[str, float]  # {count, total_us, longest_us}
    launch_delay_us: Mapping[str, float]  # {p50, p90, max, count}; count 0 when no launch was matched
    median_kernel_us: float
    top_kernels_by_time: tuple[Mapping[str, Any], ...]  # ({name, total_us, count}, ...)
    top_kernels_by_count: tuple[Mapping[str, Any], ...]
    top_ops_by_count: tuple[Mapping[str, Any], ...]  # CPU ops ({name, count}, ...)
    kernel_names: tuple[str, ...]  # sorted, distinct
    kernel_counts: Mapping[str, int] = field(default_factory=dict)
    launches: int = 0  # runtime/driver launch calls seen on the CPU side

    @property
    def busy_fraction(self) -> float | None:
        """GPU busy time / wall time of the step; None without GPU activity."""
        if self.kernels == 0 or self.wall_us <= 0:
            return None
        return min(1.0, self.gpu_busy_us / self.wall_us)

    def row(self) -> StepRow:
        """The step as the report gives it (report/trace.py): times rounded to ns, the busy fraction to 4 places."""
        bf, g, d = self.busy_fraction, self.idle_gaps, self.launch_delay_us
        return StepRow(
            name=self.name, cpu_ops=self.cpu_ops, kernels=self.kernels, memcpy=self.memcpy, memset=self.memset,
            launches=self.launches, gpu_busy_us=round(self.gpu_busy_us, 3), cpu_span_us=round(self.cpu_span_us, 3),
            gpu_span_us=round(self.gpu_span_us, 3), wall_us=round(self.wall_us, 3),
            gpu_busy_fraction=None if bf is None else round(bf, 4),
            idle_gaps=IdleGaps(int(g["count"]), _r(g["total_us"]), _r(g["longest_us"])),
            launch_delay_us=LaunchDelay(_r(d["p50"]), _r(d["p90"]), _r(d["max"]), int(d["count"])),
            median_kernel_us=round(self.median_kernel_us, 3),
            top_kernels_by_time=[KernelTotal(**k) for k in self.top_kernels_by_time],
            top_kernels_by_count=[KernelCount(**k) for k in self.top_kernels_by_count],
            top_ops_by_count=[OpCount(**o) for o in self.top_ops_by_count],
            distinct_kernels=len(self.kernel_names),
        )

    def to_json(self) -> dict[str, Any]:
        return self.row().to_json()


@dataclass(frozen=True)
class SignatureMatch:
    """A fallback signature seen in some steps, with the evidence in words."""

    id: str
    package: str  # packages.toml key (fla, causal_conv1d)
    distribution: str  # what to pip install (fla-core)
    title: str  # flash-linear-attention
    functions: tuple[str, ...]
    steps: tuple[str, ...]
    evidence: str
    by_python_stack: bool

    def reported(self, with_steps: bool = True) -> FallbackSignature:
        """The signature as a report gives it: the distribution to install; the steps it was seen in (the trace
        report), or none (verify --step's whole step)."""
        return FallbackSignature(self.id, self.distribution, list(self.functions),
                                 list(self.steps) if with_steps else None, self.evidence)


@dataclass(frozen=True)
class TraceAnalysis:
    """The analysis of one trace: whole-trace stats, per-step stats, verdict-relevant facts, findings."""

    summary: StepStats
    steps: tuple[StepStats, ...]
    findings: tuple[Finding, ...]
    cpu_only: bool
    fast_packages: tuple[str, ...]  # packages whose fast kernels ran somewhere in the trace
    fallbacks: tuple[SignatureMatch, ...]
    launch_bound_steps: tuple[str, ...]
    metadata: Mapping[str, Any]  # top-level keys of the trace (gpus, error text, ...), small
    events: int
    path: str | None = None
    bytes: int | None = None
    gzip: bool = False
    breakdown: Mapping[str, Any] = field(default_factory=dict)  # phases and layer types (trace/phases.py)
    budget: tuple[Any, ...] = ()  # per step, what a step budget reads (budget/collect.py StepRaw), when asked

    @property
    def diagnosis(self) -> Diagnosis:
        """healthy | fallback (a torch reference path ran) | launch-bound."""
        if self.fallbacks and not self.cpu_only:
            return Diagnosis.FALLBACK
        if self.launch_bound_steps:
            return Diagnosis.LAUNCH_BOUND
        return Diagnosis.HEALTHY

    @property
    def verdict(self) -> Verdict:
        """The verdict of `kernelcheck trace` on this trace (ready | fallback), decided from its findings as a
        report's is (core/decide.py)."""
        return decide.verdict((), self.findings)

    @property
    def missing_packages(self) -> tuple[str, ...]:
        """Distributions whose absence the trace shows (pip names), in signature order."""
        return tuple(dict.fromkeys(m.distribution for m in self.fallbacks)) if not self.cpu_only else ()


def _r(v: float) -> float | int:
    return v if isinstance(v, int) else round(v, 3)
