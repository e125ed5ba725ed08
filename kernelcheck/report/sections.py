"""The report's values about where and on what it ran, typed: the machine (`EnvironmentView`), the model
(`ModelRef`), doctor's packing decision (`PackingSection`) and the fla backend each op runs on
(`BackendsSection`). Each writes the JSON the report carries and reads it back (to_json(from_json(x)) == x)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelcheck.core.environment import Environment, Gpu, PackageState, TorchInfo
from kernelcheck.core.fix import Fix
from kernelcheck.core.models import ResolvedModel
from kernelcheck.integrations.fla_dispatch import OpBackend


def torch_json(t: TorchInfo) -> dict[str, Any]:
    """torch as the report shows it: its version (in words when it does not import: `import_error` is said there,
    so it has no key of its own), CUDA and ABI."""
    return {"version": t.version, "cuda": t.cuda, "cxx11abi": t.cxx11abi, "hip": t.hip,
            "cuda_available": t.cuda_available}


def torch_from_json(data: Mapping[str, Any]) -> TorchInfo:
    """A report's `torch` typed again (import_error None: the JSON says it only in `version`'s words)."""
    return TorchInfo(data["version"], data["cuda"], data["cxx11abi"], data["hip"], data["cuda_available"])


@dataclass(frozen=True)
class EnvironmentView:
    """The probed machine as a report carries it (core/environment.Environment, less what only decisions read):
    versions, torch as probed (its JSON: torch_json), the GPUs (capability a value), nvcc, each kernel package's
    state and the variables recorded."""

    python: str
    python_tag: str
    platform: str
    torch: TorchInfo | None
    triton: str | None
    transformers: str | None
    kernels: str | None
    gpus: tuple[Gpu, ...]
    gpu_source: str
    driver: str | None
    nvcc: str | None
    nvcc_source: str
    nvcc_path: str | None
    cuda_home: str | None
    jit_nvcc_source: str | None = None  # in the JSON only when set
    packages: Mapping[str, PackageState] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, env: Environment) -> EnvironmentView:
        return cls(env.python, env.python_tag, env.platform, env.torch, env.triton, env.transformers, env.kernels,
                   tuple(env.gpus), env.gpu_source, env.driver, env.nvcc, env.nvcc_source, env.nvcc_path,
                   env.cuda_home, env.jit_nvcc_source, dict(env.packages), dict(env.env_vars))

    def to_json(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "python_tag": self.python_tag,
            "platform": self.platform,
            "torch": torch_json(self.torch) if self.torch is not None else None,
            "triton": self.triton,
            "transformers": self.transformers,
            "kernels": self.kernels,
            "gpus": [{"name": g.name, "capability": g.capability.dotted, "index": g.index} for g in self.gpus],
            "gpu_source": self.gpu_source,
            "driver": self.driver,
            "nvcc": self.nvcc,
            "nvcc_source": self.nvcc_source,
            "nvcc_path": self.nvcc_path,
            "cuda_home": self.cuda_home,
            **({"jit_nvcc_source": self.jit_nvcc_source} if self.jit_nvcc_source else {}),
            "packages": {k: asdict(v) for k, v in self.packages.items()},
            "env": dict(self.env),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EnvironmentView:
        """A report's `environment` typed again; one recorded before nvcc_source and nvcc_path were probed
        (docs/measurements/2026-12-02-h200-doctor-7552758/doctor_train.json) reads with nvcc_source "none" and no
        path."""
        t = data["torch"]
        return cls(
            data["python"], data["python_tag"], data["platform"], torch_from_json(t) if t else None,
            data["triton"], data["transformers"], data["kernels"],
            tuple(Gpu(g["name"], g["capability"], g["index"]) for g in data["gpus"]), data["gpu_source"],
            data["driver"], data["nvcc"], data.get("nvcc_source", "none"), data.get("nvcc_path"), data["cuda_home"],
            data.get("jit_nvcc_source"), {k: PackageState(**v) for k, v in data["packages"].items()},
            dict(data["env"]))


@dataclass(frozen=True)
class ModelRef:
    """The model a report is about: what was typed, the Hub id, model_type, where its config came from, the
    layer family and the layer class (None for a family without one)."""

    query: str
    id: str | None
    model_type: str
    source: str  # alias | shipped-config | local | hf-cache | hub | model_type
    family: str
    layer: str | None

    @property
    def name(self) -> str:
        """The Hub id, or what was typed when there is none."""
        return self.id or self.query

    @classmethod
    def of(cls, model: ResolvedModel) -> ModelRef:
        return cls(model.query, model.id, model.model_type, model.source, model.spec.family,
                   model.spec.layer or None)

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "id": self.id, "model_type": self.model_type, "source": self.source,
                "family": self.family, "layer": self.layer}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelRef:
        return cls(data["query"], data["id"], data["model_type"], data["source"], data["family"], data["layer"])


@dataclass(frozen=True)
class ModeOutcome:
    """What one packing mode does with packed rows here: correct | raises | mixed, why, and the fix."""

    mode: str
    outcome: str  # correct | raises | mixed
    reason: str
    fix: Fix | str | None  # a Fix once built

    def __post_init__(self) -> None:
        object.__setattr__(self, "fix", Fix.of(self.fix))

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "outcome": self.outcome, "reason": self.reason, "fix": self.fix}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModeOutcome:
        return cls(data["mode"], data["outcome"], data["reason"], data["fix"])


@dataclass(frozen=True)
class PackingSection:
    """doctor's packing decision (packing/decide.py): the declared mode, whether the installed transformers
    refuses packed kwargs on the torch path, which packing-relevant functions are bound fast, each mode's outcome,
    whether packed rows need a forward without a cache (None: unknown), and the references."""

    declared: str | None
    guard_in_source: bool | None
    functions: Mapping[str, bool]
    modes: tuple[ModeOutcome, ...]
    cache_skips_packing: bool | None
    reference: str

    def outcome(self, mode: str) -> ModeOutcome:
        return next(o for o in self.modes if o.mode == mode)

    def to_json(self) -> dict[str, Any]:
        return {"declared": self.declared, "guard_in_source": self.guard_in_source,
                "functions": dict(self.functions), "modes": [o.to_json() for o in self.modes],
                "cache_skips_packing": self.cache_skips_packing, "reference": self.reference}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PackingSection:
        return cls(data["declared"], data["guard_in_source"], dict(data["functions"]),
                   tuple(ModeOutcome.from_json(m) for m in data["modes"]), data["cache_skips_packing"],
                   data["reference"])


# what the nvcc a JIT would use is (Environment.nvcc_source), in the report's words
NVCC_WORDS = {"toolkit": "a CUDA toolkit's", "pip": "pip's nvidia-cuda-nvcc (not a toolkit)", "none": "none"}


@dataclass(frozen=True)
class BackendsSection:
    """doctor's fla backend section (doctor/backends.py): the fla release and where its dispatch was read from,
    the nvcc a TileLang JIT would use, the FLA_* switches set, and the backend of each op and pass."""

    fla: str | None
    read_from: str  # source | table | none (integrations/fla_dispatch.Layout.origin)
    reference: str
    nvcc_version: str | None
    nvcc_path: str | None
    nvcc_source: str  # toolkit | pip | none
    switches: Mapping[str, str]
    ops: tuple[OpBackend, ...]

    def to_json(self) -> dict[str, Any]:
        return {"fla": self.fla, "read_from": self.read_from, "reference": self.reference,
                "nvcc": {"version": self.nvcc_version, "path": self.nvcc_path, "source": self.nvcc_source,
                         "is": NVCC_WORDS.get(self.nvcc_source, self.nvcc_source)},
                "switches": dict(self.switches), "ops": [op.to_json() for op in self.ops]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BackendsSection:
        nvcc = data["nvcc"]
        ops = tuple(OpBackend(o["function"], o["pass"], o["backend"], o["cause"], o["outcome"], o["reason"],
                              o["certain"]) for o in data["ops"])
        return cls(data["fla"], data["read_from"], data["reference"], nvcc["version"], nvcc["path"],
                   nvcc["source"], dict(data["switches"]), ops)
