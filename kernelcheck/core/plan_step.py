"""A plan step and a rejected candidate: the values an install plan (install/plan.py, install/extension_plan.py) and a
Kernel Hub pre-fetch (integrations/kernels_prefetch.py) are made of, which the report holds (`Report.plan`) and
report/text.py renders. Here, at the bottom, so the report can hold them without importing install.

Each step and each rejection says why as a kind (`StepKind`, `RejectKind`): decisions and tests read the kind and
the fields, never the wording of `reason`; the wording is made where the step is made and tested once per kind
(tests/unit/test_plan_wording.py). docs/install.md lists the kinds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class StepKind(StrEnum):
    """Why a step is in the plan (its `action` says what it does)."""

    INSTALLED = "installed"  # keep: installed, imports, and fits (its extension carries the GPU code)
    NEWEST_COMPATIBLE = "newest-compatible"  # install: the newest pure wheel whose tags and requirements fit
    WHEELHOUSE_WHEEL = "wheelhouse-wheel"  # install: a compiled wheel in the wheelhouse matches this torch/CUDA/GPU
    RELEASE_WHEEL = "release-wheel"  # install: the upstream release wheel for this torch/CUDA/cxx11abi/Python
    SOURCE_BUILD = "source-build"  # build: no matching wheel, an arch-targeted build from the sdist
    CPU_TORCH = "cpu-torch"  # refuse: torch is a CPU build
    NO_GPU_ARCH = "no-gpu-arch"  # refuse: no GPU visible and no --arch: no architecture to build or match for
    NO_CANDIDATE = "no-candidate"  # refuse: no candidate fits (each is listed in `rejected` with its kind)
    PINNED_CHANGE = "pinned-change"  # blocked: every candidate would change torch/triton/transformers
    DEPENDENCY_REFUSED = "dependency-refused"  # refuse: a dependency of the package cannot be installed
    DEPENDENCY = "dependency"  # keep/install: a requirement of another step (of a fix too)
    DEPENDENCY_UNAVAILABLE = "dependency-unavailable"  # refuse: a missing requirement with no wheel found
    FIX_IMAGE = "fix-image"  # offer: what the image must carry that pip cannot install (the CUDA toolkit)
    FIX_CHANGE = "fix-change"  # offer, or install when --allow-change names it: a fix that changes a pinned package
    FIX_ADD = "fix-add"  # offer, or install (--with, train-mode default): an additive fix of a breakage
    FIX_UNAVAILABLE = "fix-unavailable"  # refuse: a fix that is wanted but cannot be had here
    WITH = "with"  # install: a package asked for with --with
    WITH_UNAVAILABLE = "with-unavailable"  # refuse: asked for with --with, but no wheel was found
    UNSUPPORTED_PACKAGE = "unsupported-package"  # refuse: kernelcheck does not install this kind of package yet
    HUB = "hub"  # a Kernel Hub pre-fetch step: its action (download, cached, missing, ...) says what happened


class RejectKind(StrEnum):
    """Why a candidate was not taken."""

    NOT_NEEDED = "not-needed"  # another distribution of the package is the one transformers imports
    SOURCE_EXCLUDED = "source-excluded"  # --source names another way
    HUB_NOT_PIP = "hub-not-pip"  # --source hub: Hub builds are loaded by `kernels`, not installed with pip
    PYPI_UNAVAILABLE = "pypi-unavailable"  # PyPI gave no wheel (offline, not found, download failed)
    WHEEL_FILE = "wheel-file"  # the file is corrupt, not a wheel, or renamed
    SHA256 = "sha256"  # the file's sha256 differs from the expected one
    WHEEL_TAGS = "wheel-tags"  # its Python, ABI or platform tags do not fit
    PINNED_CHANGE = "pinned-change"  # it would change torch/triton/transformers
    BREAKAGE = "breakage"  # it hits a known breakage that another candidate avoids
    VERSION = "version"  # its version is not in the requirement
    CPU_TORCH = "cpu-torch"  # a CUDA extension, and torch here is a CPU build
    TORCH_MINOR = "torch-minor"  # built for another torch minor
    CUDA_MAJOR = "cuda-major"  # built for another CUDA major
    CXX11ABI = "cxx11abi"  # built with the other C++ ABI
    GPU_ARCH = "gpu-arch"  # its extension carries no code that runs on a target GPU
    NO_EXTENSION = "no-extension"  # a CUDA-extension package's wheel without its extension module (mamba#977)
    PTX_ONLY = "ptx-only"  # only PTX for a target GPU: the driver would JIT-compile it
    NEEDS_TRIAL = "needs-trial"  # unlabelled compiled wheel and no trial import was run
    TRIAL_FAILED = "trial-failed"  # the trial import against the installed torch failed
    NEWER_CHOSEN = "newer-chosen"  # a newer matching wheel was chosen
    NO_WHEEL = "no-wheel"  # the wheelhouse has no wheel of it
    RELEASE_MISSING = "release-missing"  # upstream publishes no release wheel for this build (HTTP 404)
    RELEASE_UNREACHABLE = "release-unreachable"  # the release server could not be asked (network, HTTP error)
    RELEASE_UNCHECKED = "release-unchecked"  # the release wheel was not checked (offline, no version known)
    NO_SDIST = "no-sdist"  # no source distribution to build from
    NO_NVCC = "no-nvcc"  # no nvcc for a build
    NVCC_CUDA_MAJOR = "nvcc-cuda-major"  # nvcc's CUDA major differs from torch's
    NVCC_ARCH = "nvcc-arch"  # nvcc cannot target a GPU architecture asked for
    BUILD_TOOLS = "build-tools"  # setuptools/wheel missing for a build without isolation
    HUB_VARIANT = "hub-variant"  # a Kernel Hub build variant kernels rejected (its reason is kernels')


@dataclass(frozen=True)
class Rejected:
    candidate: str
    reason: str
    kind: RejectKind = field(kw_only=True)

    def to_json(self, with_kind: bool = True) -> dict[str, Any]:
        return {"candidate": self.candidate, "reason": self.reason, **({"kind": self.kind} if with_kind else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Rejected:
        """A Hub step's rejection has no `kind` in its JSON: it is a rejected Hub variant."""
        return cls(data["candidate"], data["reason"], kind=RejectKind(data.get("kind", RejectKind.HUB_VARIANT)))


class Role(StrEnum):
    """Why a step is in the plan, as a value the planner orders and counts by (never printed)."""

    PACKAGE = "package"  # a kernel package the model needs, or one asked for with --with
    DEPENDENCY = "dependency"  # a requirement of another step (dependencies are installed first)
    FIX = "fix"  # a breakage rule's remedy (matrix/breakages.toml remedies)


# The JSON keys of an install step, in order (a Hub step has the first five, then command and rejected when set).
_KEYS = ("package", "action", "source", "spec", "reason", "command", "rejected", "artifact", "sha256", "arches",
         "import_name", "severity")


@dataclass(frozen=True)
class Step:
    package: str  # distribution name (a Hub step: the repo id)
    action: str  # keep | install | build | offer | refuse | blocked (Hub: download | cached | planned | ...)
    source: str  # installed | wheelhouse | release | build | pypi | pip-resolve | hub | -
    spec: str
    reason: str
    command: str = ""
    rejected: tuple[Rejected, ...] = ()
    artifact: str = ""  # local wheel/sdist path or release URL the installer uses
    sha256: str = ""
    arches: tuple[str, ...] = ()  # GPU code the chosen wheel carries / the build targets
    import_name: str = ""
    severity: str = ""  # a predicted problem this step leaves: broken | fallback
    role: Role = Role.PACKAGE  # not in JSON: the kind says why
    rules: tuple[str, ...] = ()  # ids of the breakages behind `severity` (JSON: `rules`, when there are any)
    kind: StepKind = field(kw_only=True)  # why the step is there

    def to_json(self) -> dict[str, Any]:
        """An install step: every key, then its kind. A Hub step is no pip install: package, action, source, spec,
        reason, then command when it has one and rejected (a `missing` step always); no kind (its action says)."""
        if self.kind == StepKind.HUB:
            out: dict[str, Any] = {k: getattr(self, k) for k in _KEYS[:5]}
            if self.command:
                out["command"] = self.command
            if self.rejected or self.action == "missing":
                out["rejected"] = [r.to_json(with_kind=False) for r in self.rejected]
            return out
        out = {k: getattr(self, k) for k in _KEYS}
        out["rejected"] = [r.to_json() for r in self.rejected]
        out["arches"] = list(self.arches)
        if self.rules:
            out["rules"] = list(self.rules)
        out["kind"] = self.kind
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        """A step as a report's JSON prints it; one without `kind` is a Hub step."""
        kind = StepKind(data.get("kind", StepKind.HUB))
        return cls(data["package"], data["action"], data["source"], data["spec"], data["reason"],
                   data.get("command", ""), tuple(Rejected.from_json(r) for r in data.get("rejected", ())),
                   data.get("artifact", ""), data.get("sha256", ""), tuple(data.get("arches", ())),
                   data.get("import_name", ""), data.get("severity", ""), rules=tuple(data.get("rules", ())), kind=kind)
