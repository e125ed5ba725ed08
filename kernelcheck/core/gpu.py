"""GPU compute capabilities: one value type, and the one `--arch` parser for doctor, install and hub.

A capability is written five ways across the tools kernelcheck talks to: "9.0" (torch, nvidia-smi),
"sm_90" (nvcc SASS, wheel .so files), "compute_90" (PTX), 90 (kernels' integer form) and "9.0a".
`Capability` (core/capability.py, re-exported here) parses all of them and gives each form back, so no module
converts by hand; a `Gpu` holds one.

`--arch` targets GPUs that are not here (a docker build stage has none): doctor then checks the
kernels, rules and breakages against those GPUs instead of the absent local ones. Only capabilities
NVIDIA GPUs really have are accepted (matrix/gpus.toml, with its reference), so a typo such as 99.9,
999 or 90.0 is bad input (exit 2), not a target no GPU has.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Protocol

from kernelcheck.core.capability import Capability, sm_name
from kernelcheck.core.environment import Environment, Gpu
from kernelcheck.core.errors import BadInput

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

log = logging.getLogger(__name__)

_FORMS_HELP = ("Use the major.minor form, comma-separated: 8.0 (A100), 8.6 (RTX 30xx/A10), 8.9 (L4/L40), "
               "9.0 (H100/H200), 10.0 (B200/GB200), 12.0 (RTX 50xx); sm_90 and 90 are accepted too.")


def known(*, m: Matrix) -> tuple[Capability, ...]:
    """The compute capabilities NVIDIA GPUs have (`m`'s gpus.toml)."""
    data = m.table("gpus.toml")["capabilities"]
    try:
        return tuple(Capability.parse(c) for c in data["known"])
    except ValueError as exc:
        from kernelcheck.core.matrix_shape import bad

        raise bad(m.root / "gpus.toml", "capabilities.known", f"{exc}; each is a major.minor such as "
                  "\"9.0\"") from None


def parse_arch(text: str, allowed: tuple[Capability, ...] | None = None, *, m: Matrix) -> tuple[Gpu, ...]:
    """`"9.0,10.0"` (also `sm_90`, `90`, `9.0a`) -> target GPUs with those compute capabilities.

    `allowed` defaults to `known(m=m)`. Raises BadInput with the accepted forms for anything else.
    """
    allowed = known(m=m) if allowed is None else allowed
    items = [p.strip() for p in re.split(r"[,;\s]+", text or "") if p.strip()]
    if not items:
        raise BadInput("--arch needs at least one compute capability, for example --arch 9.0 (H100/H200) or "
                       "--arch 8.0,9.0,10.0.")
    gpus: list[Gpu] = []
    for i, item in enumerate(items):
        try:
            cap = Capability.parse(item)
        except ValueError:
            raise BadInput(f"--arch: '{item}' is not a CUDA compute capability. {_FORMS_HELP}")
        if cap not in allowed:
            raise BadInput(f"--arch: '{item}' is read as {cap.dotted} ({cap.sm}), which no NVIDIA GPU has (known: "
                           f"{', '.join(c.dotted for c in allowed)}; matrix/gpus.toml). {_FORMS_HELP}")
        if any(g.capability == cap for g in gpus):
            continue
        gpus.append(Gpu(name="--arch target", capability=cap, index=i))
    return tuple(gpus)


def cap_to_sm(cap: str | Capability) -> int:
    """'9.0' -> 90, '10.3' -> 103."""
    if isinstance(cap, Capability):
        return cap.number
    major, _, minor = cap.partition(".")
    return int(major) * 10 + int(minor or 0)


def arch_serves(arches: tuple[str, ...], cap: str | Capability) -> str | None:
    """How a GPU of capability `cap` can run code with these arches: 'sass', 'ptx-jit' or None.

    SASS runs on the same major with an equal or higher minor (sm_80 runs on 8.6); PTX is JIT-compiled
    by the driver for any equal or newer GPU (slow first launch, and only if the driver is new enough).
    """
    want = cap_to_sm(cap)
    sass = [int(a[3:]) for a in arches if a.startswith("sm_") and a[3:].isdigit()]
    ptx = [int(a[8:]) for a in arches if a.startswith("compute_") and a[8:].isdigit()]
    if any(s // 10 == want // 10 and s <= want for s in sass):
        return "sass"
    if any(p <= want for p in ptx):
        return "ptx-jit"
    return None


def capability_number(env: Environment) -> int | None:
    """The first GPU's capability as kernels' integer (90), or None without a GPU."""
    if not env.capabilities:
        return None
    return env.capabilities[0].number


__all__ = ["Capability", "arch_serves", "cap_to_sm", "capability_number", "default_device", "known", "parse_arch",
           "sm_name"]


class _TargetBuild(Protocol):
    @property
    def cuda(self) -> str | None: ...  # "13.0"; "" or None: not a CUDA build


def default_device(env: Environment, device: str | None = None, target: _TargetBuild | None = None) -> str:
    """The device type the job's model sits on: `device` when the user named one (--device/--hub-device), CUDA
    for a CUDA `target` build (planning for a GPU image from another machine) or GPUs from --arch, else from this
    torch build (as kernels' backend is). core/device.py `choose` says where it came from and whether it is here."""
    if device:
        return device
    if target is not None and target.cuda:
        return "cuda"
    if env.gpus and env.gpu_source == "override":  # --arch names GPU targets: a CUDA device (core/device.py)
        return "cuda"
    if env.torch and env.torch.cuda:
        return "cuda"
    if env.torch and env.torch.hip:
        return "rocm"
    return "cpu"
