"""Wording doctor's checks share (doctor/run.py and doctor/lazy.py)."""

from __future__ import annotations

from kernelcheck.core import environment, matrix
from kernelcheck.core.device import Device, visible_here


def install_fix(query: str | None, dist: str) -> str:
    if query:
        return f"kernelcheck install --model {query}   (installs {dist} for this torch/CUDA without touching torch)"
    return f"pip install {dist}  (with a constraints file pinning your torch)"


def no_device_reason(env: environment.Environment, pkg: matrix.PackageInfo, device: Device) -> str:
    """Why `pkg`'s CUDA kernels do not run on the verdict's `device` with the torch installed (core/device.py
    runs_cuda_kernels is false)."""
    runs = f"{pkg.title}'s kernels run only on {'/'.join(pkg.devices)}"
    if env.torch and not env.torch.cuda:
        if device.type == "cuda":
            return (f"torch {env.torch.version} is a CPU build: it runs no CUDA kernel, on the CUDA GPU this verdict "
                    f"is for as here; {runs}")
        return f"torch {env.torch.version} is a CPU build and no CUDA GPU is usable here; {runs}"
    if device.type != "cuda" and visible_here("cuda", env):
        return f"the verdict is for the {device.type} (--device {device.type}), not this machine's CUDA GPU; {runs}"
    return f"torch sees no CUDA GPU on this machine; {runs}"


def unnamed_reason(pkg: matrix.PackageInfo) -> str:
    """The row of a CUDA prediction whose GPU is neither here nor named (core/device.py gpu_unnamed)."""
    return (f"predicted for a CUDA GPU, and none is here or named: there {pkg.title}'s kernels run, but whether they "
            "run fast depends on the GPU (some fail on one capability), so this is not judged fast")


def unnamed_fix(query: str | None) -> str:
    return (f"name the job's GPU: kernelcheck doctor --model {query or 'M'} --arch 9.0  (the compute capability: "
            "8.0 A100, 9.0 H100/H200, 10.0 B200)")
