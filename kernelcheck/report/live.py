"""The live section's typed lines (verify/statuses.py and verify/run.py for a run of the real layers, verify/step.py
for `verify --step`): what each line says, as values. Their sentences are written in report/live_text.py."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcheck.report.hub import PrintedLine
from kernelcheck.report.live_details import BenchmarkPass, Timing
from kernelcheck.report.ratio_controls import TimingControls
from kernelcheck.report.step import PathMeasured, Projected, StepCost, StepPath


# -- a run of the real layers (verify, doctor --live) ---------------------------------------------
@dataclass(frozen=True)
class NotRunLine:
    """Nothing ran: the modeling module does not import."""


@dataclass(frozen=True)
class BuiltLine:
    """The model built from its config: class, shape, layer types, size, dtype, device, tokens (batch 1)."""

    model_class: str
    shape: str
    layer_types: tuple[str, ...]
    parameters: int
    dtype: str
    device: str
    tokens: int


@dataclass(frozen=True)
class LaunchLine:
    """One profiled step's launch signal: its CPU ops and span on a CPU; on a GPU its kernels and how busy the
    GPU was of the step's wall time, or the trace's words when the step is launch-bound."""

    step: str
    on_gpu: bool
    cpu_ops: int
    cpu_span_us: float
    kernels: int
    busy_fraction: float | None
    wall_us: float
    median_kernel_us: float
    launch_bound: str | None = None  # trace/verdicts.launch_bound_sentence, when launch-bound


@dataclass(frozen=True)
class TritonCacheLine:
    """The Triton cache's entries before and after the run; `cold`: the first calls compiled."""

    cache_dir: str
    entries_before: int
    entries_after: int
    cold: bool


@dataclass(frozen=True)
class ComparisonSkippedLine:
    """No reference comparison was run, and why."""

    why: str


@dataclass(frozen=True)
class ComparisonFailedLine:
    """The reference run failed (the exception)."""

    error: str


@dataclass(frozen=True)
class PassError:
    """One step compared with the torch reference: the logits' relative error, and the gradients' (train)."""

    step: str
    logits_rel_err: float | None
    grads_rel_err: float | None = None
    has_grads: bool = False


@dataclass(frozen=True)
class ComparisonLine:
    """The model's results vs the torch reference on the same weights and inputs, per step, and the verdict."""

    tolerance: float
    passes: tuple[PassError, ...]
    ok: bool


@dataclass(frozen=True)
class BenchmarkSkippedLine:
    """No benchmark was run, and why."""

    why: str


@dataclass(frozen=True)
class BenchmarkPassLines:
    """One benchmark pass of the layer (report/live_details.BenchmarkPass: both paths, the ratios, its note), with
    the layer, the pass's name and the tokens it ran on."""

    layer: str
    name: str  # forward | forward+backward
    tokens: int
    result: BenchmarkPass


@dataclass(frozen=True)
class BenchmarkOnCpuLine:
    """No GPU: both benchmark paths ran the torch reference, so their ratio measures nothing."""


@dataclass(frozen=True)
class TimingLine:
    """Where the run's time went: the phases that ran and their seconds (report/live_details.Timing)."""

    timing: Timing


@dataclass(frozen=True)
class CapturedLine:
    """Third-party output was kept out of the terminal: its summary, per path (`verify --step`) or one (None)."""

    summaries: tuple[tuple[str | None, str], ...]


# -- a whole training step (verify --step) --------------------------------------------------------
@dataclass(frozen=True)
class WholeStepLine:
    """The step that was measured: shape, tokens, checkpointing, and the model a path ran (None: none ran)."""

    shape: str
    tokens: int
    checkpointing: bool
    measured: PathMeasured | None


@dataclass(frozen=True)
class StepPathLine:
    """One path's measured step (`name` fast | reference), or why it failed."""

    name: str
    path: StepPath


@dataclass(frozen=True)
class SpeedupLine:
    """The bound path's measured speedup over the torch reference, and its kernel ratio (None: not measured)."""

    speedup: float
    kernel_ratio: float | None = None


@dataclass(frozen=True)
class ProjectionLine:
    """One path's projection to the real layer counts (`name` fast | reference), or why it could not be made."""

    name: str
    projection: Projected


@dataclass(frozen=True)
class ProjectedSpeedupLine:
    speedup: float


@dataclass(frozen=True)
class ProjectionMethodLine:
    """How the projection is made, in short (the JSON's step.projection.method says it in full)."""


@dataclass(frozen=True)
class SamePathLine:
    """Both step paths ran the same implementations: what ran, and no ratio, projection or cache claim."""

    implementations: tuple[str, ...]


@dataclass(frozen=True)
class ControlsLine:
    """A timed ratio's controls (A/A and an injected slowdown), the ratio measured (None: not both paths timed) and
    whether it is claimed."""

    controls: TimingControls
    ratio: float | None
    decided: bool


@dataclass(frozen=True)
class CheckCostLine:
    """What the check cost, and whether its Triton cache was cold."""

    cost: StepCost


LiveLine = (NotRunLine | BuiltLine | LaunchLine | TritonCacheLine | ComparisonSkippedLine | ComparisonFailedLine
            | ComparisonLine | BenchmarkSkippedLine | BenchmarkPassLines | BenchmarkOnCpuLine | TimingLine
            | CapturedLine | WholeStepLine | StepPathLine | SpeedupLine | ProjectionLine | ProjectedSpeedupLine
            | ProjectionMethodLine | CheckCostLine | SamePathLine | ControlsLine | PrintedLine)
