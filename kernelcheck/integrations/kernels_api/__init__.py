"""One adapter for the `kernels` API per release generation, chosen by the installed version and checked by
feature detection.

    adapter()  -> KernelsApi (Gen015 / Gen017 / Gen018 / Gen019 in gen0NN.py), or Unsupported with the reason

Known generations: 0.15-0.16 (Gen015), 0.17 (Gen017), 0.18 (Gen018), 0.19 (Gen019). A version kernelcheck does not
know (older than 0.15, or newer than 0.19) is tried against the newest layout first: when every name it needs is
there, that adapter is used and says so (`newer_than_known`); when not, `Unsupported` carries the missing names and
the caller turns it into a finding ("kernels X is newer than kernelcheck knows: Hub variants not listed") - never
an internal error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kernelcheck.integrations.kernels_api.base import (
    Decision,
    KernelsApi,
    MetaInfo,
    System,
    VariantInfo,
)
from kernelcheck.integrations.kernels_api.gen015 import Gen015
from kernelcheck.integrations.kernels_api.gen017 import Gen017
from kernelcheck.integrations.kernels_api.gen018 import Gen018
from kernelcheck.integrations.kernels_api.gen019 import Gen019

__all__ = ["Decision", "KernelsApi", "MetaInfo", "System", "Unsupported", "VariantInfo", "adapter",
           "choose", "GENERATIONS"]

log = logging.getLogger(__name__)

# (first version, first version of the next generation, adapter), oldest first
GENERATIONS: tuple[tuple[str, str, type[KernelsApi]], ...] = (
    ("0.15", "0.17", Gen015), ("0.17", "0.18", Gen017), ("0.18", "0.19", Gen018), ("0.19", "0.20", Gen019))


@dataclass(frozen=True)
class Unsupported:
    """No adapter fits the installed kernels: what the report says instead of listing variants."""

    version: str | None
    reason: str  # one sentence for the finding
    missing: tuple[str, ...] = ()


def _generation_of(version: str) -> type[KernelsApi] | None:
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version).release
    except InvalidVersion:
        return None
    for lo, hi, cls in GENERATIONS:
        if Version(lo).release <= v[:2] < Version(hi).release:
            return cls
    return None


def choose(version: str | None, probe: Callable[[KernelsApi], list[str]] | None = None) -> KernelsApi | Unsupported:
    """The adapter for `version` of kernels. `probe(adapter)` lists the names that adapter misses here (default:
    its own `probe()`, which imports kernels); passed in so the choice itself is testable without kernels."""
    check = probe or (lambda a: a.probe())
    if not version:
        return Unsupported(None, "kernels is not installed")
    cls = _generation_of(version)
    if cls is not None:
        known = cls(version)
        missing = check(known)
        if not missing:
            return known
        return Unsupported(version, f"kernels {version} does not have the layout of its release generation "
                                    f"({cls.generation}): {', '.join(missing)} not found (a patched or broken "
                                    "install): Hub variants not listed", tuple(missing))
    return _guess(version, check)


def _guess(version: str, check: Callable[[KernelsApi], list[str]]) -> KernelsApi | Unsupported:
    """A version kernelcheck does not know: the newest layout that has every name it needs, else Unsupported."""
    from packaging.version import InvalidVersion, Version

    try:
        newer = Version(version) >= Version(GENERATIONS[-1][1])
    except InvalidVersion:
        newer = True
    word = "newer" if newer else "older"
    candidates = [cls for _, _, cls in reversed(GENERATIONS)] if newer else [GENERATIONS[0][2]]
    first_missing: list[str] = []
    for cls in candidates:
        a = cls(version)
        missing = check(a)
        if not missing:
            a.newer_than_known = version if newer else None
            log.info("kernels %s is %s than kernelcheck knows; its layout matches generation %s", version, word,
                     cls.generation)
            return a
        first_missing = first_missing or missing
    return Unsupported(version, f"kernels {version} is {word} than kernelcheck knows: Hub variants not listed "
                                f"({', '.join(first_missing[:3])} not found)", tuple(first_missing))


def adapter() -> KernelsApi | Unsupported:
    """The adapter for the installed kernels (its distribution version), feature-checked."""
    from kernelcheck.core import environment

    version = environment.dist_version("kernels")
    if version in _CHOSEN:  # one probe per process and version: the imports it checks do not change
        return _CHOSEN[version]
    _CHOSEN[version] = _adapter_for(version)
    return _CHOSEN[version]


_CHOSEN: dict[str | None, KernelsApi | Unsupported] = {}


def _adapter_for(version: str | None) -> KernelsApi | Unsupported:
    try:
        return choose(version)
    except Exception as exc:  # noqa: BLE001 - `import kernels` itself failed: a finding, not exit 1
        return Unsupported(version, f"kernels {version} does not import ({type(exc).__name__}: {exc}): Hub variants "
                                    "not listed")
