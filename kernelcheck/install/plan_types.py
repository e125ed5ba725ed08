"""The install plan's vocabulary: steps, options, candidates, the plan; shared by plan.py and extension_plan.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from kernelcheck.core import gpu
from kernelcheck.core import matrix as matrix_mod
from kernelcheck.core.environment import Environment, torch_minor
from kernelcheck.core.plan_step import (
    RejectKind,
    Step,
)
from kernelcheck.core.status import Mode, Severity, Verdict
from kernelcheck.install import wheels
from kernelcheck.install.wheels import TrialImport, WheelInfo

PINNED = ("torch", "triton", "transformers")
SOURCES = ("auto", "wheelhouse", "release", "build", "pypi", "hub")


@dataclass(frozen=True)
class Options:
    mode: str = Mode.TRAIN
    source: str = "auto"
    arches: tuple[str, ...] = ()  # capabilities to build/match for ("9.0")
    arch_origin: str = "gpu"  # gpu | --arch | none
    allow_change: frozenset[str] = frozenset()
    with_packages: tuple[str, ...] = ()
    offline: bool = False
    model: str = "M"
    wheelhouse: str = ""
    target: str | None = None
    fixes: bool = True  # train mode: install additive fixes (tilelang for fla#640) unless --no-fixes
    without: tuple[str, ...] = ()  # fixes not to install (--without tilelang)
    # the data the plan decides on (matrix/), loaded where the Options are made (the command), read by the plan
    matrix: matrix_mod.Matrix = field(default_factory=matrix_mod.load, compare=False, repr=False)


@dataclass(frozen=True)
class Candidates:
    """What `sources.gather` found for one distribution."""

    wheels: tuple[WheelInfo, ...] = ()  # wheelhouse (and downloaded PyPI) wheels
    pypi_wheel: WheelInfo | None = None  # newest wheel PyPI gave (pure packages)
    pypi_error: str | None = None
    sdist: str | None = None  # local sdist path (--sdist, wheelhouse, or downloaded from PyPI)
    sdist_origin: str = ""  # --sdist | wheelhouse | pypi
    sdist_error: str | None = None
    release_url: str | None = None
    release_status: str | None = None  # "exists" | "missing: ..." | "unreachable: ..." | "skipped: ..."
    release_kind: RejectKind | None = None  # why the release wheel is not taken (None: it exists, or not asked)
    build_tools: dict[str, bool] = field(default_factory=dict)  # wheel/setuptools/ninja importable
    nvcc_arches: tuple[str, ...] = ()  # compute_XX the nvcc here accepts
    resolved: tuple[WheelInfo, ...] = ()  # a fix and its dependencies as pip resolved them, pins held
    resolve_error: str | None = None  # why pip could not resolve the fix here
    resolve_note: str | None = None  # pinned packages' own unmet requirements the resolution was made around
    trials: dict[str, TrialImport] = field(default_factory=dict)  # wheel path -> trial import
    overlay: dict[str, str] = field(default_factory=dict)  # build tool -> where the build overlay gets it


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    target: wheels.WheelFit
    blocked: bool  # a step needs a pinned package changed: nothing is executed

    def to_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.steps]

    @property
    def predicted(self) -> Verdict:
        """ready | fallback | broken: what the job gets if the plan is carried out."""
        sev = {s.severity for s in self.steps if s.action not in ("offer",) or s.severity == Severity.BROKEN}
        if Severity.BROKEN in sev:
            return Verdict.BROKEN
        if Severity.FALLBACK in sev or self.blocked:
            return Verdict.FALLBACK
        return Verdict.READY


def wheel_fit(env: Environment, opts: Options) -> wheels.WheelFit:
    t = env.torch
    cuda_major = int(t.cuda.split(".")[0]) if t and t.cuda else None
    mm = torch_minor(t.version if t else None) or "?"
    return wheels.WheelFit(env.python_tag, env.platform, mm, cuda_major, t.cxx11abi if t else None, opts.arches)


def version_text(v: str | None) -> Version | None:
    try:
        return Version(v) if v else None
    except InvalidVersion:
        return None


def sm_tag(arches: tuple[str, ...]) -> str:
    return ", ".join(f"sm_{gpu.cap_to_sm(a)}" for a in arches) or "no GPU arch"


def pip_cmd(spec_or_path: str, opts: Options, extra: str = "") -> str:
    """The step's `run:` line, pasteable as printed: with --no-deps pip installs that one file and nothing it
    requires, so the constraints file kernelcheck's own pip call adds (PINNED as installed) changes nothing in it."""
    tgt = f" --target {opts.target} --upgrade" if opts.target else ""
    return f"pip install --no-deps{tgt}{extra} {spec_or_path}"


# ---------------------------------------------------------------- pure-Python (Triton) packages

