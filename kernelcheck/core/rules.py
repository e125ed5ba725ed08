"""Evaluate matrix/breakages.toml against the probed environment and the bindings."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from kernelcheck.core import matrix as matrix_mod
from kernelcheck.core.environment import Environment

_CAPABILITY_KEYS = ("gpu_capability", "gpu_capability_min", "gpu_capability_max")
_VERSION_KEYS = ("torch", "triton", "transformers", "fla", "causal_conv1d", "mamba_ssm", "nvcc", "kernels")


def base_version(v: str | None) -> Version | None:
    if not v:
        return None
    try:
        return Version(Version(v.split("+")[0]).base_version)
    except InvalidVersion:
        return None


def version_in(v: str | None, spec: str) -> bool:
    bv = base_version(v)
    if bv is None:
        return False
    try:
        return SpecifierSet(spec).contains(bv, prereleases=True)
    except InvalidSpecifier:
        return False


def _cap(c: str) -> tuple[int, int]:
    a, _, b = c.partition(".")
    return int(a), int(b or 0)


@dataclass(frozen=True)
class Facts:
    """Everything a rule may look at, in one place."""

    env: Environment
    mode: str
    bound: frozenset[str]  # packages transformers binds for a used function
    built_nvcc: dict[str, str] = field(default_factory=dict)  # package -> nvcc that built it (manifest)
    model: str = ""


@dataclass(frozen=True)
class RuleHit:
    rule: matrix_mod.Breakage
    message: str
    fix: str
    certain: bool  # False when a condition could not be decided (e.g. unknown build compiler)


def _holds_capability(key: str, want: Any, capabilities: Iterable[str]) -> bool:
    """Decide a gpu_capability, gpu_capability_min or gpu_capability_max condition on the GPUs' capabilities."""
    if key == "gpu_capability":
        return any(c in want for c in capabilities)
    if key == "gpu_capability_min":
        return any(_cap(c) >= _cap(want) for c in capabilities)
    return any(_cap(c) <= _cap(want) for c in capabilities)


def _holds_built_nvcc(want: Any, facts: Facts) -> bool | None:
    """Decide a built_nvcc condition from the manifest's build compilers; None when the manifest does not say."""
    got = [v for v in facts.built_nvcc.values() if v]
    if not got:
        return None  # unknown: the manifest does not say
    return any(version_in(v, want) for v in got)


def _holds(key: str, want: Any, facts: Facts) -> bool | None:
    env = facts.env
    if key in _CAPABILITY_KEYS:
        return _holds_capability(key, want, env.capabilities)
    if key in _VERSION_KEYS:
        return version_in(env.version_of(key), want)
    if key == "mode":
        return facts.mode == want
    if key == "cuda_gpu":
        return env.cuda_gpu == want
    if key == "absent":
        return all(not env.present.get(n, importlib.util.find_spec(n) is not None) for n in want)
    if key == "bound":
        return all(p in facts.bound for p in want)
    if key == "built_nvcc":
        return _holds_built_nvcc(want, facts)
    if key == "requirement_unmet":
        return any(requirement_unmet(*w.split(":", 1)) for w in want)
    raise ValueError(f"matrix/breakages.toml: unknown condition '{key}'")


def holds(key: str, want: Any, facts: Facts) -> bool | None:
    """One condition of a rule on `facts`: True, False, or None when it cannot be decided."""
    return _holds(key, want, facts)


def requirement_unmet(dist: str, requirement: str) -> bool:
    """True when the installed `dist` declares a Requires-Dist on `requirement` (read from its metadata, not
    from a table here) and the installed version of it is outside that specifier."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        reqs = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return False
    for line in reqs:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.replace("_", "-").lower() != requirement.replace("_", "-").lower():
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = metadata.version(requirement)
        except metadata.PackageNotFoundError:
            return True
        return not req.specifier.contains(have, prereleases=True)
    return False


def evaluate(facts: Facts, m: matrix_mod.Matrix | None = None) -> list[RuleHit]:
    """The rules of `m` (default: matrix/) that may apply to `facts`, each with its message and fix filled in."""
    m = m or matrix_mod.load()
    env = facts.env
    fill = {
        "triton": env.triton or "absent", "torch": env.torch.version if env.torch else "absent",
        "transformers": env.transformers or "absent", "fla": env.version_of("fla") or "absent",
        "capability": ",".join(c.replace(".", "") for c in env.capabilities) or "none", "model": facts.model or "M",
    }
    hits = []
    for rule in m.breakages:
        results = [_holds(k, v, facts) for k, v in rule.when.items()]
        if any(r is False for r in results):
            continue
        certain = all(r is True for r in results)
        hits.append(RuleHit(rule, rule.message.format(**fill), rule.fix.format(**fill), certain))
    return hits


def match_import_error(error: str) -> matrix_mod.ImportErrorRule | None:
    import re

    for r in matrix_mod.load().import_errors:
        if re.search(r.pattern, error):
            return r
    return None
