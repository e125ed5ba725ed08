"""The `trace` report's typed values (trace/render.report_of fills them from a trace analysis, trace/results.py):
the file and its diagnosis, the whole-trace row, one row per profiler step, the breakdown and the annotation.
to_json() gives the report's `trace`, `summary`, `steps` and `breakdown` keys as they always were; trace/render.py
writes the text from the same values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from kernelcheck.core.codec import Fields


@dataclass(frozen=True)
class KernelTotal:
    """A kernel of the top lists: its name, its time in all (us) and how many times it ran."""

    name: str
    total_us: float
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "total_us": self.total_us, "count": self.count}


@dataclass(frozen=True)
class KernelCount(KernelTotal):
    """A kernel of the top list by count: the same values, the count before the time in the JSON."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "total_us": self.total_us}


@dataclass(frozen=True)
class OpCount(Fields):
    """A CPU op of the top list: its name and how many times it ran."""

    name: str
    count: int


@dataclass(frozen=True)
class IdleGaps(Fields):
    """The holes between busy intervals inside a step's GPU span: how many, their total and the longest (us)."""

    count: int
    total_us: float
    longest_us: float


@dataclass(frozen=True)
class LaunchDelay:
    """Kernel start minus the end of its launch call: median, p90, max and how many launches were matched (count 0:
    none was), in the unit of the field that holds it: a step row's `launch_delay_us` (us); verify --step's whole
    step `launch_delay_ms` (ms, report/step.PathMeasured), without the count (None: no key)."""

    p50: float
    p90: float
    max: float
    count: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"p50": self.p50, "p90": self.p90, "max": self.max}
        if self.count is not None:
            out["count"] = self.count
        return out


@dataclass(frozen=True)
class StepRow:
    """One profiler step (or the whole trace: name "trace") as the report gives it: trace/results.StepStats
    rounded. The fields are in the JSON's order (report/text.py lists the plain ones in it)."""

    name: str
    cpu_ops: int
    kernels: int
    memcpy: int
    memset: int
    launches: int
    gpu_busy_us: float
    cpu_span_us: float
    gpu_span_us: float
    wall_us: float
    gpu_busy_fraction: float | None
    idle_gaps: IdleGaps
    launch_delay_us: LaunchDelay
    median_kernel_us: float
    top_kernels_by_time: list[KernelTotal]
    top_kernels_by_count: list[KernelCount]
    top_ops_by_count: list[OpCount]
    distinct_kernels: int

    def plain(self) -> list[tuple[str, Any]]:
        """The fields that are one value (not a table or a list), in the JSON's order."""
        return [(f.name, v) for f in fields(self)
                if not isinstance(v := getattr(self, f.name), (IdleGaps, LaunchDelay, list))]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = ([x.to_json() for x in v] if isinstance(v, list)
                           else v.to_json() if isinstance(v, (IdleGaps, LaunchDelay)) else v)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepRow:
        return cls(**{**data, "idle_gaps": IdleGaps(**data["idle_gaps"]),
                      "launch_delay_us": LaunchDelay(**data["launch_delay_us"]),
                      "top_kernels_by_time": [KernelTotal(**k) for k in data["top_kernels_by_time"]],
                      "top_kernels_by_count": [KernelCount(**k) for k in data["top_kernels_by_count"]],
                      "top_ops_by_count": [OpCount(**o) for o in data["top_ops_by_count"]]})


@dataclass(frozen=True)
class FallbackSignature:
    """A fallback signature the trace matched: its id, the distribution to install, the functions it stands for,
    the steps it was seen in and the evidence in words (trace/verdicts.py). `steps` None: a whole training step's
    reading (report/step.PathMeasured), which has no profiler steps to name; no `steps` key then."""

    id: str
    package: str
    functions: list[str]
    steps: list[str] | None
    evidence: str

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "package": self.package, "functions": list(self.functions)}
        if self.steps is not None:
            out["steps"] = list(self.steps)
        out["evidence"] = self.evidence
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FallbackSignature:
        steps = data.get("steps")
        return cls(data["id"], data["package"], list(data["functions"]), None if steps is None else list(steps),
                   data["evidence"])


@dataclass(frozen=True)
class Annotated:
    """--annotate: the trace file written back and how many instant events it got (trace/annotate.py)."""

    file: str
    instant_events: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "instant_events": self.instant_events}


class Diagnosis(StrEnum):  # a str: JSON and comparisons with plain strings keep working
    """What a trace shows: healthy, a torch reference path (fallback), or steps whose GPU waited for launches. The
    verdict is the report's (core/decide.py, from the findings that say so): ready for healthy, else fallback."""

    HEALTHY = "healthy"
    FALLBACK = "fallback"
    LAUNCH_BOUND = "launch-bound"


@dataclass(frozen=True)
class TraceFile:
    """The file read and its diagnosis (healthy | fallback | launch-bound), with the facts it rests on."""

    file: str | None
    bytes: int | None
    gzip: bool
    events: int
    cpu_only: bool
    # the trace's own top-level "gpus" records, as written ({name, capability, ...}): the profiler's shape, not ours
    gpus: list[Mapping[str, Any]]
    profiler_error: str | None
    diagnosis: Diagnosis
    missing_packages: list[str]
    fast_packages: list[str]
    launch_bound_steps: list[str]
    fallback_signatures: list[FallbackSignature]
    annotated: Annotated | None = None  # --annotate; the JSON shows it last, only when set

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file, "bytes": self.bytes, "gzip": self.gzip, "events": self.events,
            "cpu_only": self.cpu_only, "gpus": [dict(g) for g in self.gpus], "profiler_error": self.profiler_error,
            "diagnosis": self.diagnosis, "missing_packages": list(self.missing_packages),
            "fast_packages": list(self.fast_packages), "launch_bound_steps": list(self.launch_bound_steps),
            "fallback_signatures": [m.to_json() for m in self.fallback_signatures]}
        if self.annotated is not None:
            out["annotated"] = self.annotated.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceFile:
        ann = data.get("annotated")
        return cls(data["file"], data["bytes"], data["gzip"], data["events"], data["cpu_only"],
                   [dict(g) for g in data["gpus"]], data["profiler_error"], Diagnosis(data["diagnosis"]),
                   list(data["missing_packages"]), list(data["fast_packages"]), list(data["launch_bound_steps"]),
                   [FallbackSignature.from_json(m) for m in data["fallback_signatures"]],
                   Annotated(**ann) if ann is not None else None)


@dataclass(frozen=True)
class TraceSection:
    """trace: the file and its diagnosis (`trace`), the whole-trace `summary`, one row per step, the breakdown.
    `breakdown` stays a Mapping: it is trace/phases.py's table by phase name and layer type name (layer types
    the model defines, `_`-prefixed counters among them), read by name; verify --step carries the same tables
    (report/step.PathMeasured.phases, layer_types)."""

    trace: TraceFile
    summary: StepRow
    steps: list[StepRow]
    breakdown: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trace": self.trace.to_json(), "summary": self.summary.to_json(),
                               "steps": [s.to_json() for s in self.steps]}
        if self.breakdown:
            out["breakdown"] = self.breakdown
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceSection:
        """From the report's own keys (the section is merged into the report's JSON)."""
        return cls(TraceFile.from_json(data["trace"]), StepRow.from_json(data["summary"]),
                   [StepRow.from_json(s) for s in data["steps"]], data.get("breakdown"))
