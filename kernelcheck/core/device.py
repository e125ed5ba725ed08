"""The device a verdict is for: one value per report (doctor, verify, hub, doctor --upgrade), named in the headline
and in the JSON as `device: {type, origin, visible}`.

- `--device TYPE` (origin "flag") wins: `--device cpu` is the verdict for running here on the CPU.
- `--arch 9.0` names GPU targets, so the device is CUDA (origin "arch"), even on a CPU torch build: a docker
  build-stage gate must not pass because it silently judged the CPU.
- `hub --torch/--cuda` planning for a CUDA build of another machine: CUDA (origin "target").
- verify runs the model here: the device it runs on (origin "run-here"): the GPU when one is visible, else the CPU.
- otherwise a visible CUDA GPU (origin "gpu-visible"); else the torch build's device (origin "torch-build"): a CUDA
  build on a machine without a GPU (a login node, a docker build stage) is for a job that runs on a CUDA machine,
  so the verdict is a prediction for one; a CPU build's job runs on the CPU.

`visible`: whether a device of that type is visible here; a verdict for a device that is not is a prediction for
a machine that has one, and its findings say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kernelcheck.core.environment import Environment

ORIGINS = ("flag", "arch", "target", "run-here", "gpu-visible", "torch-build")


class _Target(Protocol):
    @property
    def cuda(self) -> str | None: ...


@dataclass(frozen=True)
class Device:
    type: str  # kernels' device types: cuda | rocm | xpu | cpu | mps | npu
    origin: str  # ORIGINS
    visible: bool  # a device of this type is visible here (GPUs from --arch are not)

    @property
    def predicted(self) -> bool:
        """The verdict is a prediction for another machine (one with this device), not what happens here."""
        return not self.visible

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "origin": self.origin, "visible": self.visible}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Device:
        return cls(str(data["type"]), str(data["origin"]), bool(data["visible"]))


def visible_here(kind: str, env: Environment) -> bool:
    """Whether a device of type `kind` is visible on this machine (probed, not --arch)."""
    if kind == "cpu":
        return True
    probed = bool(env.gpus) and env.gpu_source != "override"
    if kind == "cuda":
        return probed and not (env.torch is not None and env.torch.hip)
    if kind == "rocm":
        return probed and bool(env.torch is not None and env.torch.hip)
    return False


def choose(env: Environment, flag: str | None = None, target: _Target | None = None,
           run_here: bool = False) -> Device:
    """The device of the verdict (see the module's docstring for the order)."""
    if flag:
        return Device(flag, "flag", visible_here(flag, env))
    if env.gpu_source == "override" and env.gpus:
        return Device("cuda", "arch", False)
    if target is not None and target.cuda:
        return Device("cuda", "target", visible_here("cuda", env))
    if run_here:
        kind = "cuda" if visible_here("cuda", env) else "rocm" if visible_here("rocm", env) else "cpu"
        return Device(kind, "run-here", True)
    for kind in ("cuda", "rocm"):
        if visible_here(kind, env):
            return Device(kind, "gpu-visible", True)
    if env.torch is not None and env.torch.hip:
        return Device("rocm", "torch-build", False)
    if env.torch is not None and env.torch.cuda:
        return Device("cuda", "torch-build", False)
    return Device("cpu", "torch-build", True)


def runs_cuda_kernels(device: Device, env: Environment) -> bool:
    """Whether a pip package's CUDA kernels run on the verdict's device with the torch installed: a CUDA verdict and
    a CUDA build of torch. No GPU on this machine is asked for: a CUDA verdict without one is a prediction for a
    machine that has one (`device.predicted`), and there the package's kernels run."""
    return device.type == "cuda" and env.torch is not None and bool(env.torch.cuda) and not env.torch.hip


def gpu_unnamed(device: Device, env: Environment) -> bool:
    """A CUDA prediction whose GPU is neither here nor named (--arch): the package's kernels run there, but whether
    they run fast depends on the GPU (breakages of one capability), so a function row is not judged fast."""
    return runs_cuda_kernels(device, env) and not env.gpus
