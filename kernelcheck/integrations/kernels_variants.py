"""kernelcheck's words about kernels' build variants (pure: VariantInfo values in, text out).

`nearest` ranks the variants kernels rejected by how far each is from the system (platform, backend, torch minor,
CUDA version); `would_match` says in which environment kernels would accept one.
"""

from __future__ import annotations

from typing import Any

from kernelcheck.integrations.kernels_api import Decision, VariantInfo


def _score(v: VariantInfo, sysinfo: dict[str, Any]) -> tuple[int, ...]:
    """How far a rejected variant is from this system: platform, backend, torch minor, CUDA version."""
    if v.kind != "arch":
        return (0, 0, 1 if v.backend != sysinfo["backend"] else 0, 0, 0)
    plat = (v.platform != sysinfo["cpu"]) + (v.os != sysinfo["os"])
    backend = 0 if v.backend == sysinfo["backend"] else 1
    dist = 0
    if v.framework == "torch" and v.framework_version and sysinfo["torch"]:
        dist = abs((v.framework_version[0] * 100 + v.framework_version[1])
                   - (sysinfo["torch"][0] * 100 + sysinfo["torch"][1]))
    cuda_dist = 0
    if v.backend == "cuda" and v.backend_version and sysinfo["cuda"]:
        cuda_dist = (abs(v.backend_version[0] - sysinfo["cuda"][0]) * 100
                     + abs(v.backend_version[1] - sysinfo["cuda"][1]))
    return (plat, backend, dist, cuda_dist, 0)


def nearest(rejected: list[Decision], sysinfo: dict[str, Any]) -> tuple[str | None, str | None]:
    """The rejected variant closest to `sysinfo`, and the environment that would accept it (pure)."""
    if not rejected:
        return None, None
    best = min(rejected, key=lambda d: _score(d.info, sysinfo)).info
    return best.variant, would_match(best)


def would_match(v: VariantInfo) -> str:
    """In words: the torch/CUDA environment in which kernels would accept the variant `v`."""
    if v.kind == "noarch":
        return "any torch" if v.backend == "universal" else f"any torch build for {v.backend}"
    if v.kind == "sdk":
        return f"any framework{' built for ' + v.backend if v.backend else ''}"
    mm = v.framework_version or (0, 0)
    if v.framework == "torch":
        out = f"torch {mm[0]}.{mm[1]}"
        if v.cxx11_abi is not None:
            out += f" ({'cxx11' if v.cxx11_abi else 'pre-cxx11'} ABI)"
    elif v.framework == "torch-stable-abi":
        out = f"torch >= {mm[0]}.{mm[1]}"
    else:
        out = f"{v.framework} {mm[0]}.{mm[1]}"
    if v.backend == "cuda" and v.backend_version:
        major, minor = v.backend_version
        out += f" built for CUDA {major}.{minor} or a later {major}.x"
    elif v.backend == "cpu":
        out += " CPU build"
    else:
        out += f" built for {v.backend_variant}"
    return out + f", on {v.platform}-{v.os}"
