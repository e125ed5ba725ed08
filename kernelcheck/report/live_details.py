"""The live section's typed details (verify/run.py fills them from a run of the real layers): where and how it ran,
the model it built, each profiled step's trace statistics, the comparison with the torch reference, the benchmark,
the Triton cache and the timing. to_json() gives the keys the live section's JSON carries after `ran`, in order;
the section's lines about them are made in report/live_text.py from report/live.py's values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

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
class LogitsError:
    """One step's logits against the reference: relative and largest absolute error (None: not finite), ok."""

    rel_err: float | None
    max_abs_err: float | None
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {"rel_err": self.rel_err, "max_abs_err": self.max_abs_err, "ok": self.ok}


@dataclass(frozen=True)
class GradsError:
    """The train step's gradients against the reference: the global relative error, the worst parameter, ok."""

    rel_err: float | None
    worst_parameter: str
    worst_parameter_rel_err: float | None
    parameters: int
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


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
class TritonCacheState:
    """The Triton cache's directory, its entries before and after the run, those compiled, and `cold`: the cache
    was empty and the run filled it."""

    cache_dir: str
    entries_before: int
    entries_after: int
    compiled: int
    cold: bool

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


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
    # open: verify/bench.run_benchmark's passes (forward, forward+backward) and their keys follow the mode and
    # what failed ({skipped} without a kernel-calling layer); None: no --benchmark
    benchmark: Mapping[str, Any] | None
    triton_cache: TritonCacheState
    timing: Mapping[str, float]  # open: the `..._s` of the phases that ran, in the order they ran

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "dtype": self.dtype, "shape": self.shape, "tokens": self.tokens,
                "model": self.model.to_json(), "fast_functions": list(self.fast_functions),
                "forced_torch_after_failure": list(self.forced_torch_after_failure),
                "steps": {n: s.to_json() for n, s in self.steps.items()},
                "reference_comparison": self.reference_comparison.to_json(), "benchmark": self.benchmark,
                "triton_cache": self.triton_cache.to_json(), "timing": dict(self.timing)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveDetails:
        return cls(data["device"], data["dtype"], data["shape"], data["tokens"], LiveModel.from_json(data["model"]),
                   list(data["fast_functions"]), list(data["forced_torch_after_failure"]),
                   {n: ProfiledStep.from_json(s) for n, s in data["steps"].items()},
                   comparison(data["reference_comparison"]), data["benchmark"],
                   TritonCacheState(**data["triton_cache"]), dict(data["timing"]))
