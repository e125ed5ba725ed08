"""Wording doctor's checks share (doctor/run.py and doctor/lazy.py)."""

from __future__ import annotations

from kernelcheck.core import environment, matrix


def install_fix(query: str | None, dist: str) -> str:
    if query:
        return f"kernelcheck install --model {query}   (installs {dist} for this torch/CUDA without touching torch)"
    return f"pip install {dist}  (with a constraints file pinning your torch)"


def no_device_reason(env: environment.Environment, pkg: matrix.PackageInfo) -> str:
    if env.torch and not env.torch.cuda:
        return (f"torch {env.torch.version} is a CPU build and no CUDA GPU is usable here; {pkg.title}'s kernels "
                f"run only on {'/'.join(pkg.devices)}")
    return f"no CUDA GPU is visible to torch here; {pkg.title}'s kernels run only on {'/'.join(pkg.devices)}"
