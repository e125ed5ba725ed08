"""Requires-Dist read from installed metadata: whether an installed package's declared requirement on another one
holds (a breakage rule's `requirement_unmet` condition, e.g. tilelang's window on apache-tvm-ffi)."""

from __future__ import annotations

from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement

from kernelcheck.core import matrix


def requirements_unmet(m: matrix.Matrix) -> tuple[str, ...]:
    """The `requirement_unmet` pairs of the breakage rules that hold here (read from installed metadata)."""
    pairs = {w for b in m.breakages for w in b.when.get("requirement_unmet", ())}
    return tuple(sorted(w for w in pairs if requirement_unmet(*w.split(":", 1))))


def requirement_unmet(dist: str, requirement: str) -> bool:
    """True when the installed `dist` declares a Requires-Dist on `requirement` (read from its metadata, not
    from a table here) and the installed version of it is outside that specifier."""
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
