"""The `verify --step` section's typed values (verify/step.py fills them from its two workers' results and the
projection, verify/projection.py): each path's measured step, both projections to the real layer counts, and what
the check cost. to_json() gives the `step` key's JSON; the live section's lines about it are made in
report/live_text.py from these values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kernelcheck.core.codec import Fields
from kernelcheck.report.ratio_controls import TimingControls
from kernelcheck.report.trace import FallbackSignature, LaunchDelay


@dataclass(frozen=True)
class Failed:
    """A path that did not run, or a projection that could not be made: why (and the layer types it lacked)."""

    error: str
    missing_layer_types: tuple[str, ...] = ()  # a projection with no measured layer of these types

    def to_json(self) -> dict[str, Any]:
        if self.missing_layer_types:
            return {"error": self.error, "missing_layer_types": list(self.missing_layer_types)}
        return {"error": self.error}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Failed:
        return cls(data["error"], tuple(data.get("missing_layer_types", ())))


@dataclass(frozen=True)
class WorkerCost(Fields):
    """What one path's worker process cost (s): its imports, the model's build, the first (compiling) step, in
    all as the worker saw it; the wall clock (s since the epoch) when it started, passed the GPU gate and finished
    (verify/step.py keeps the paths' GPU work sequential with them), and the process as the parent timed it."""

    import_s: float
    build_s: float
    first_step_s: float
    total_s: float
    started_at: float
    gate_passed_at: float
    finished_at: float
    process_s: float


@dataclass(frozen=True)
class PathMeasured:
    """One path's measured step (bound kernels, or every function on its torch reference): its times, counts
    and memory, the trace's reading of it, the shortened model it ran, and the worker's cost (`cost`)."""

    step_ms: float
    tokens_per_s: float
    kernels_per_step: int
    cpu_ops_per_step: int
    gpu_busy_fraction: float | None
    launch_bound: bool
    trace_verdict: str
    fallback_signatures: list[FallbackSignature]  # seen in the whole step (no profiler steps named: steps None)
    fast_packages: list[str]
    launch_delay_ms: LaunchDelay  # in ms, no count
    peak_memory_bytes: int
    peak_memory_kind: str
    implementations: list[str]
    # the step's breakdown (trace/phases.collect), open as the trace report's (report/trace.TraceSection.breakdown):
    # phases by the names the trace marks (forward, backward, optimizer), layer types by the model's own type names
    # with `_`-prefixed counters among them; read by name (verify/projection.py reads the worker's copy)
    phases: Mapping[str, Any]
    layer_types: Mapping[str, Any]
    device: str
    dtype: str
    layers: list[str]
    parameters: int
    fused_adamw: bool
    cost: WorkerCost
    trace_file: str | None
    timed_steps_ms: list[float]
    first_loss: float

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = ([m.to_json() for m in v] if f.name == "fallback_signatures"
                           else v.to_json() if isinstance(v, (LaunchDelay, WorkerCost)) else v)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PathMeasured:
        """Also how verify/step.py types a worker's result (its keys are these)."""
        return cls(**{**data, "launch_delay_ms": LaunchDelay(**data["launch_delay_ms"]),
                      "fallback_signatures": [FallbackSignature.from_json(m) for m in data["fallback_signatures"]],
                      "cost": WorkerCost(**data["cost"])})


StepPath = PathMeasured | Failed


def _path(data: dict[str, Any]) -> StepPath:
    return Failed.from_json(data) if "error" in data else PathMeasured.from_json(data)


@dataclass(frozen=True)
class LayerCost:
    """One layer type's cost per step (ms): its layer ranges, its share of the optimizer, and their spread."""

    layer_ms: float
    optimizer_ms: float
    total_ms: float
    spread_ms: list[float]  # [min, max] over the profiled steps

    def to_json(self) -> dict[str, Any]:
        return {"layer_ms": self.layer_ms, "optimizer_ms": self.optimizer_ms, "total_ms": self.total_ms,
                "spread_ms": self.spread_ms}


@dataclass(frozen=True)
class PathProjection:
    """One path's step projected to the real layer counts: measured + (full - built) x per-layer cost."""

    measured_step_ms: float
    built_layers: dict[str, int]
    full_layers: dict[str, int]
    per_layer: dict[str, LayerCost]
    rest_ms: float
    projected_step_ms: float
    projected_spread_ms: list[float]
    projected_tokens_per_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"measured_step_ms": self.measured_step_ms, "built_layers": self.built_layers,
                "full_layers": self.full_layers, "per_layer": {t: c.to_json() for t, c in self.per_layer.items()},
                "rest_ms": self.rest_ms, "projected_step_ms": self.projected_step_ms,
                "projected_spread_ms": self.projected_spread_ms,
                "projected_tokens_per_s": self.projected_tokens_per_s}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PathProjection:
        return cls(**{**data, "per_layer": {t: LayerCost(**c) for t, c in data["per_layer"].items()}})


Projected = PathProjection | Failed


def _projected(data: dict[str, Any]) -> Projected:
    return Failed.from_json(data) if "error" in data else PathProjection.from_json(data)


@dataclass(frozen=True)
class Projection:
    """Both paths' projections, how they were made (`method`) and the projected speedup (both projected)."""

    fast: Projected
    reference: Projected
    method: str
    projected_speedup: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fast": self.fast.to_json(), "reference": self.reference.to_json(),
                               "method": self.method}
        if self.projected_speedup is not None:
            out["projected_speedup"] = self.projected_speedup
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Projection:
        """Also how verify/step.py types verify/projection.compare's result (its keys are these)."""
        return cls(_projected(data["fast"]), _projected(data["reference"]), data["method"],
                   data.get("projected_speedup"))


@dataclass(frozen=True)
class TritonCache(Fields):
    """Whether the check paid for compiling: the cache's entries before, those the bound path added, `state`
    cold | warm, the bound path's first step and a note on what it means."""

    dir: str
    entries_before: int
    entries_added: int
    state: str
    first_step_s: float | None
    note: str

    @property
    def cold(self) -> bool:
        return self.state == "cold"


@dataclass(frozen=True)
class StepCost:
    """What the check cost: in all, the bound path's first (compiling) step, each worker process, the cache."""

    total_s: float
    fast_first_step_s: float | None
    fast_process_s: float | None
    reference_process_s: float | None
    triton_cache: TritonCache

    def to_json(self) -> dict[str, Any]:
        return {"total_s": self.total_s, "fast_first_step_s": self.fast_first_step_s,
                "fast_process_s": self.fast_process_s, "reference_process_s": self.reference_process_s,
                "triton_cache": self.triton_cache.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepCost:
        return cls(data["total_s"], data["fast_first_step_s"], data["fast_process_s"], data["reference_process_s"],
                   TritonCache(**data["triton_cache"]))


@dataclass(frozen=True)
class StepSection:
    """`verify --step`: the shape, tokens and checkpointing it ran with, both paths, the measured speedup and
    kernel ratio (both paths measured), the projection, the cost, and each path's captured output (a summary)."""

    shape: str
    tokens: int
    checkpointing: bool
    fast: StepPath
    reference: StepPath
    projection: Projection
    cost: StepCost
    captured_output: dict[str, str]
    speedup: float | None = None
    kernel_ratio: float | None = None
    same_path: bool = False  # both paths ran the same implementations: no speedup, projection or cache state
    controls: TimingControls | None = None  # the ratio's controls, run on the bound path (None: it did not run)
    ratio: float | None = None  # the reference's step time over the bound path's, claimed or not

    @property
    def paths(self) -> dict[str, StepPath]:
        """The paths by their JSON name, fast first."""
        return {"fast": self.fast, "reference": self.reference}

    def measured(self) -> PathMeasured | None:
        """The first path that ran (its model and device describe the step), or None."""
        return next((p for p in self.paths.values() if isinstance(p, PathMeasured)), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"shape": self.shape, "tokens": self.tokens, "checkpointing": self.checkpointing,
                               "paths": {n: p.to_json() for n, p in self.paths.items()}}
        if self.speedup is not None:
            out["speedup"] = self.speedup
            if self.kernel_ratio is not None:
                out["kernel_ratio"] = self.kernel_ratio
        out.update({"projection": self.projection.to_json(), "cost": self.cost.to_json(),
                    "captured_output": dict(self.captured_output)})
        if self.same_path:
            out["same_path"] = True
        if self.controls is not None:
            out["controls"] = {**self.controls.to_json(), "ratio": self.ratio,
                               "decided": self.speedup is not None}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepSection:
        paths = data["paths"]
        return cls(data["shape"], data["tokens"], data["checkpointing"], _path(paths["fast"]),
                   _path(paths["reference"]), Projection.from_json(data["projection"]),
                   StepCost.from_json(data["cost"]), dict(data["captured_output"]), data.get("speedup"),
                   data.get("kernel_ratio"), data.get("same_path", False), _controls(data.get("controls")),
                   (data.get("controls") or {}).get("ratio"))


def _controls(data: Mapping[str, Any] | None) -> TimingControls | None:
    """The controls from their JSON (without the section's `ratio` and `decided`), or None."""
    if not data:
        return None
    return TimingControls.from_json({k: v for k, v in data.items() if k not in ("ratio", "decided")})
