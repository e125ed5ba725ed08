"""Evaluate matrix/breakages.toml against the probed environment and the bindings."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from kernelcheck.core import matrix
from kernelcheck.core.capability import Capability
from kernelcheck.core.environment import Environment
from kernelcheck.core.fix import Fix

# the conditions a rule may name: core/matrix.py, which validates them; every other key is a version key (one of
# matrix.STACK_KEYS or a package of matrix/packages.toml), checked there as the file is read
_CAPABILITY_KEYS = matrix.CAPABILITY_KEYS


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


@dataclass(frozen=True)
class Facts:
    """Everything a rule may look at, in one place."""

    env: Environment
    mode: str
    bound: frozenset[str]  # packages transformers binds for a used function
    built_nvcc: dict[str, str] = field(default_factory=dict)  # package -> nvcc that built it (manifest)
    model: str = ""
    # the fast functions the job uses (empty: every fla op kernelcheck knows for fla_backend, undecided for `used`)
    functions: tuple[str, ...] = ()

    # how the installed fla picks each op's backend: integrations/fla_dispatch.py `backends`, passed in by the caller
    # (core imports no integration); None: not asked, so a fla_backend condition is undecided
    fla_dispatch: Callable[[Environment, tuple[str, ...]], list[Any]] | None = None
    fla_ops: tuple[str, ...] = ()  # every fla op of the matrix (evaluate fills it from the matrix it is given)
    # the verdict is for a CUDA device (core/device.py), GPU here or not: what `cuda_gpu` asks; None: a GPU here
    cuda: bool | None = None

    def fla_backends(self) -> list[Any]:
        """The backend of each fla op and pass here; [] when no `fla_dispatch` was given."""
        if self.fla_dispatch is None:
            return []
        return self.fla_dispatch(self.env, self.functions or self.fla_ops)


def _fla_ops(m: matrix.Matrix) -> tuple[str, ...]:
    """Every fla op kernelcheck knows: the functions of matrix/functions.toml whose package is fla."""
    return tuple(f.name for f in m.functions.values() if f.package == "fla")


@dataclass(frozen=True)
class RuleHit:
    rule: matrix.Breakage
    message: str
    fix: Fix  # the rule's fix, filled in for this environment
    certain: bool  # False when a condition could not be decided (e.g. unknown build compiler)


def backend_matches(ops: list[Any], patterns: list[str]) -> bool | None:
    """A fla_backend condition: whether any op's key (integrations/fla_dispatch.py `OpBackend`) matches one of
    `patterns` (fnmatch); None when an op could not be decided."""
    if any(fnmatch.fnmatch(op.key, p) for op in ops if op.certain for p in patterns):
        return True
    if any(fnmatch.fnmatch(op.key, p) for op in ops for p in patterns) or any(op.backend == "unknown" for op in ops):
        return None
    return False


def _holds_capability(key: str, want: Any, capabilities: Iterable[Capability]) -> bool:
    """Decide a gpu_capability, gpu_capability_min or gpu_capability_max condition on the GPUs' capabilities."""
    if key == "gpu_capability":
        return any(c in {Capability.parse(w) for w in want} for c in capabilities)
    if key == "gpu_capability_min":
        return any(c >= Capability.parse(want) for c in capabilities)
    return any(c <= Capability.parse(want) for c in capabilities)


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
    if key in ("mode", "cuda_gpu", "absent", "bound", "used"):
        return _holds_simple(key, want, facts)
    if key == "built_nvcc":
        return _holds_built_nvcc(want, facts)
    if key == "fla_backend":
        return backend_matches(facts.fla_backends(), list(want)) if facts.fla_dispatch is not None else None
    if key == "requirement_unmet":  # the probe read the metadata (environment.probe); unprobed is undecided
        return any(w in env.requirements_unmet for w in want) if env.requirements_unmet is not None else None
    return version_in(env.version_of(key), want)  # torch, triton, ... or a package's version key


def _holds_simple(key: str, want: Any, facts: Facts) -> bool | None:
    env = facts.env
    if key == "mode":
        return bool(facts.mode == want)
    if key == "cuda_gpu":
        return bool((env.cuda_gpu if facts.cuda is None else facts.cuda) == want)
    if key == "absent":  # the probe looks up every name a rule lists (environment.probe); any other is undecided
        if any(n not in env.present for n in want):
            return None
        return all(not env.present[n] for n in want)
    if key == "used":  # the job calls one of these functions; undecided where no caller said which it calls
        return any(f in facts.functions for f in want) if facts.functions else None
    return all(p in facts.bound for p in want)  # bound


def holds(key: str, want: Any, facts: Facts) -> bool | None:
    """One condition of a rule on `facts`: True, False, or None when it cannot be decided."""
    return _holds(key, want, facts)



def evaluate(facts: Facts, m: matrix.Matrix) -> list[RuleHit]:
    """The rules of `m` (the loaded matrix/, passed in by the command) that may apply to `facts`, each with its
    message and fix filled in."""
    facts = dataclasses.replace(facts, fla_ops=facts.fla_ops or _fla_ops(m))
    env = facts.env
    fill = {
        **{name: env.version_of(name) or "absent" for name in m.packages},  # {fla}: a package's version key
        "triton": env.triton or "absent", "torch": env.torch.version if env.torch else "absent",
        "transformers": env.transformers or "absent",
        "capability": ",".join(str(c.number) for c in env.capabilities) or "none", "model": facts.model or "M",
        "fla_backward": _backward_reason(facts) if env.gpus and env.version_of("fla") else "",
        "fla_tilelang": env.env_vars.get("FLA_TILELANG", "unset"),
    }
    hits = []
    for rule in m.breakages:
        results = [_holds(k, v, facts) for k, v in rule.when.items()]
        if any(r is False for r in results):
            continue
        certain = all(r is True for r in results)
        hits.append(RuleHit(rule, rule.message.format(**fill), Fix(rule.fix.format(**fill)), certain))
    return hits


def _backward_reason(facts: Facts) -> str:
    """Why chunk_gated_delta_rule's backward runs where it runs (the {fla_backward} of rule messages)."""
    ops = [op for op in facts.fla_backends() if op.phase == "backward" and op.function == "chunk_gated_delta_rule"]
    return ops[0].reason if ops else "fla's backend for it could not be decided"


def match_runtime_error(error: str, m: matrix.Matrix) -> matrix.ImportErrorRule | None:
    """The [[runtime_error]] entry of matrix/breakages.toml whose pattern the exception text matches."""
    import re

    for r in m.runtime_errors:
        if re.search(r.pattern, error):
            return r
    return None


def match_import_error(error: str, m: matrix.Matrix) -> matrix.ImportErrorRule | None:
    import re

    for r in m.import_errors:
        if re.search(r.pattern, error):
            return r
    return None
