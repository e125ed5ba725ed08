"""The live section's typed details (verify/run.py fills them from a run of the real layers): where and how it ran,
the model it built, each profiled step's trace statistics, the comparison with the torch reference, the benchmark,
the Triton cache and the timing. to_json() gives the keys the live section's JSON carries after `ran`, in order;
the section's lines about them are made in report/live_text.py from report/live.py's values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kernelcheck.core.codec import Fields
from kernelcheck.report.ratio_controls import TimingControls
from kernelcheck.report.trace import StepRow


@dataclass(frozen=True)
class LiveModel:
    """The model built from the config (verify/layers.Built): its type and class, shape, layer types, device, dtype,
    size, the config fields the shape overrode and the attention implementation."""

    model_type: str
    model_class: str  # JSON `class`
    shape: str
    layers: list[str]
    device: str
    dtype: str
    parameters: int
    overrides: Mapping[str, Any]  # open: the config fields this family's shape sets (matrix/verify.toml [tiny])
    attn_implementation: str

    def to_json(self) -> dict[str, Any]:
        return {"model_type": self.model_type, "class": self.model_class, "shape": self.shape,
                "layers": list(self.layers), "device": self.device, "dtype": self.dtype,
                "parameters": self.parameters, "overrides": self.overrides,
                "attn_implementation": self.attn_implementation}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveModel:
        return cls(data["model_type"], data["class"], data["shape"], list(data["layers"]), data["device"],
                   data["dtype"], data["parameters"], data["overrides"], data["attn_implementation"])


@dataclass(frozen=True)
class ProfiledStep:
    """One profiled step (train, prefill, decode, train-forward): its trace statistics as the trace report gives a
    step (`stats`, report/trace.StepRow: trace/results.StepStats rounded), and the trace's reading of it:
    launch-bound, its sentence, the fast packages seen and the ids of the fallback signatures matched. The JSON is
    one flat object: the row's keys, then these."""

    stats: StepRow
    launch_bound: bool
    launch_bound_sentence: str
    fast_packages: list[str]
    fallback_signatures: list[str]  # the ids of the signatures matched (trace/verdicts.py; verify/evidence.StepTrace)

    def to_json(self) -> dict[str, Any]:
        return {**self.stats.to_json(), "launch_bound": self.launch_bound,
                "launch_bound_sentence": self.launch_bound_sentence, "fast_packages": list(self.fast_packages),
                "fallback_signatures": list(self.fallback_signatures)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProfiledStep:
        return cls(StepRow.from_json({f.name: data[f.name] for f in fields(StepRow)}), data["launch_bound"],
                   data["launch_bound_sentence"], list(data["fast_packages"]), list(data["fallback_signatures"]))


@dataclass(frozen=True)
class LogitsError(Fields):
    """One step's logits against the reference: relative and largest absolute error (None: not finite), ok."""

    rel_err: float | None
    max_abs_err: float | None
    ok: bool


@dataclass(frozen=True)
class GradsError(Fields):
    """The train step's gradients against the reference: the global relative error, the worst parameter, ok."""

    rel_err: float | None
    worst_parameter: str
    worst_parameter_rel_err: float | None
    parameters: int
    ok: bool


@dataclass(frozen=True)
class StepComparison:
    """One step compared with the torch reference on the same weights and inputs (verify/compare.compare_results)."""

    logits: LogitsError
    grads: GradsError | None
    ok: bool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"logits": self.logits.to_json()}
        if self.grads is not None:
            out["grads"] = self.grads.to_json()
        out["ok"] = self.ok
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepComparison:
        grads = data.get("grads")
        return cls(LogitsError(**data["logits"]), None if grads is None else GradsError(**grads), data["ok"])


@dataclass(frozen=True)
class Compared:
    """The comparison ran: each step's errors (by step name, in the order they ran), the tolerance, ok."""

    steps: dict[str, StepComparison]
    tolerance: float
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {**{n: s.to_json() for n, s in self.steps.items()}, "tolerance": self.tolerance, "ok": self.ok}


@dataclass(frozen=True)
class ComparisonSkipped:
    """No comparison ran, and why (every function ran its torch reference)."""

    skipped: str

    def to_json(self) -> dict[str, Any]:
        return {"skipped": self.skipped}


@dataclass(frozen=True)
class ComparisonError:
    """The reference run failed: the exception (`ok` is null in the JSON)."""

    error: str

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error, "ok": None}


@dataclass(frozen=True)
class NotCompared:
    """The steps failed before a comparison could run (the JSON's `{}`)."""

    def to_json(self) -> dict[str, Any]:
        return {}


Comparison = Compared | ComparisonSkipped | ComparisonError | NotCompared


def comparison(data: Mapping[str, Any]) -> Comparison:
    """The typed comparison from verify/compare's dict (or the JSON's `reference_comparison`)."""
    if "skipped" in data:
        return ComparisonSkipped(data["skipped"])
    if "tolerance" in data:
        return Compared({n: StepComparison.from_json(v) for n, v in data.items() if isinstance(v, dict)},
                        data["tolerance"], data["ok"])
    if "error" in data:
        return ComparisonError(data["error"])
    return NotCompared()


@dataclass(frozen=True)
class TritonCacheState(Fields):
    """The Triton cache's directory, its entries before and after the run, those compiled, and `cold`: the cache
    was empty and the run filled it."""

    cache_dir: str
    entries_before: int
    entries_after: int
    compiled: int
    cold: bool


@dataclass(frozen=True)
class PathTimed(Fields):
    """One path of a benchmark pass, timed (verify/bench.py): the median ms over `iters` calls, the kernels and CPU
    ops of one profiled call, the GPU's busy fraction (None: no GPU activity), launch-bound, and the functions the
    path kept on the torch reference."""

    ms: float
    iters: int
    kernels: int
    cpu_ops: int
    gpu_busy_fraction: float | None
    launch_bound: bool
    forced_torch: list[str]


@dataclass(frozen=True)
class PathFailed:
    """One path of a benchmark pass that raised: the exception, and the functions kept on the torch reference."""

    error: str
    forced_torch: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error, "forced_torch": list(self.forced_torch)}


BenchPath = PathTimed | PathFailed


def bench_path(data: Mapping[str, Any]) -> BenchPath:
    return PathFailed(data["error"], list(data["forced_torch"])) if "error" in data else PathTimed(**data)


@dataclass(frozen=True)
class BenchmarkPass:
    """One pass of the layer (forward, forward+backward) on the bound path and on the torch reference; the ratios
    of the reference over the bound path when both were timed (the kernel ratio when the bound path launched
    kernels), and a note when the bound path kept functions on the reference. In the JSON only when set."""

    fast: BenchPath
    reference: BenchPath
    speedup: float | None = None
    kernel_ratio: float | None = None
    cpu_op_ratio: float | None = None
    note: str | None = None
    controls: TimingControls | None = None  # the ratio's controls on the bound path (None: not both timed)
    ratio: float | None = None  # the measured ratio, claimed (`speedup`) or not

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fast": self.fast.to_json(), "reference": self.reference.to_json()}
        for k in ("speedup", "kernel_ratio", "cpu_op_ratio", "note"):
            if (v := getattr(self, k)) is not None:
                out[k] = v
        if self.controls is not None:
            out["controls"] = {**self.controls.to_json(), "ratio": self.ratio, "decided": self.speedup is not None}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkPass:
        c = data.get("controls")
        return cls(bench_path(data["fast"]), bench_path(data["reference"]), data.get("speedup"),
                   data.get("kernel_ratio"), data.get("cpu_op_ratio"), data.get("note"),
                   TimingControls.from_json({k: v for k, v in c.items() if k not in ("ratio", "decided")})
                   if c else None, (c or {}).get("ratio"))


@dataclass(frozen=True)
class BenchmarkRan:
    """verify --benchmark: the layer timed, on how many tokens, each pass by name in the order it ran, and the
    mode's pass (`main`, the JSON's `pass`: forward+backward in train, forward in infer), whose values the JSON
    repeats after it."""

    layer: str
    tokens: int
    passes: dict[str, BenchmarkPass]
    main: str

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "tokens": self.tokens, "passes": {n: p.to_json() for n, p in self.passes.items()},
                "pass": self.main, **self.passes[self.main].to_json()}


@dataclass(frozen=True)
class BenchmarkSkipped:
    """No benchmark ran, and why (the built model has no kernel-calling layer)."""

    skipped: str

    def to_json(self) -> dict[str, Any]:
        return {"skipped": self.skipped}


Benchmark = BenchmarkRan | BenchmarkSkipped


def benchmark(data: Mapping[str, Any]) -> Benchmark:
    """The typed benchmark from the JSON's `benchmark` (the flat copy of the main pass is read from `passes`)."""
    if "skipped" in data:
        return BenchmarkSkipped(data["skipped"])
    return BenchmarkRan(data["layer"], data["tokens"],
                        {n: BenchmarkPass.from_json(p) for n, p in data["passes"].items()}, data["pass"])


@dataclass(frozen=True)
class Timing:
    """Where a run's time went (s), in the order the phases run: the static check, the build, the first pass,
    profiling and the comparison (None: the first pass failed, so they did not run), the benchmark (None: no
    --benchmark); in all, and without the static check's import. The JSON has the phases that ran."""

    static_s: float
    build_s: float
    first_pass_s: float
    profile_s: float | None
    compare_s: float | None
    benchmark_s: float | None
    total_s: float
    excluding_import_s: float

    def ran(self) -> list[tuple[str, float]]:
        """The phases that ran and their seconds, in order (the JSON's keys)."""
        return [(f.name, v) for f in fields(self) if (v := getattr(self, f.name)) is not None]

    def to_json(self) -> dict[str, Any]:
        return dict(self.ran())

    @classmethod
    def from_json(cls, data: Mapping[str, float]) -> Timing:
        """Also how verify/run.py types the seconds it collected (the phases that did not run are absent)."""
        return cls(data["static_s"], data["build_s"], data["first_pass_s"], data.get("profile_s"),
                   data.get("compare_s"), data.get("benchmark_s"), data["total_s"], data["excluding_import_s"])


@dataclass(frozen=True)
class LiveDetails:
    """A full run of the real layers (verify, doctor --live): where and how it ran, what it built, its profiled
    steps by name, the comparison, the benchmark, the Triton cache and the timing."""

    device: str
    dtype: str
    shape: str
    tokens: int
    model: LiveModel
    fast_functions: list[str]
    forced_torch_after_failure: list[str]
    steps: dict[str, ProfiledStep]
    reference_comparison: Comparison
    benchmark: Benchmark | None  # None: no --benchmark
    triton_cache: TritonCacheState
    timing: Timing

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "dtype": self.dtype, "shape": self.shape, "tokens": self.tokens,
                "model": self.model.to_json(), "fast_functions": list(self.fast_functions),
                "forced_torch_after_failure": list(self.forced_torch_after_failure),
                "steps": {n: s.to_json() for n, s in self.steps.items()},
                "reference_comparison": self.reference_comparison.to_json(),
                "benchmark": None if self.benchmark is None else self.benchmark.to_json(),
                "triton_cache": self.triton_cache.to_json(), "timing": self.timing.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveDetails:
        return cls(data["device"], data["dtype"], data["shape"], data["tokens"], LiveModel.from_json(data["model"]),
                   list(data["fast_functions"]), list(data["forced_torch_after_failure"]),
                   {n: ProfiledStep.from_json(s) for n, s in data["steps"].items()},
                   comparison(data["reference_comparison"]),
                   None if data["benchmark"] is None else benchmark(data["benchmark"]),
                   TritonCacheState(**data["triton_cache"]), Timing.from_json(data["timing"]))
