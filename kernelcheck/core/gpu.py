"""Target GPUs named on the command line (`--arch 9.0,10.0`) for machines that have none.

A docker build stage has no GPU, so a static check there would always answer "no device" and a
build gate could never pass. `--arch` says which GPUs the image is for; doctor then checks the
kernels, rules and breakages against those GPUs instead of the (absent) local ones.
"""

from __future__ import annotations

import re

from kernelcheck.core.environment import Gpu
from kernelcheck.core.errors import BadInput

_FORMS = re.compile(r"^(?:sm_?)?(\d{1,2})\.?(\d)[a-z]?$")


def parse_arch(text: str) -> tuple[Gpu, ...]:
    """`"9.0,10.0"` (also `sm_90`, `90`, `9.0a`) -> target GPUs with those compute capabilities.

    Raises BadInput with the accepted forms for anything else.
    """
    items = [p.strip() for p in re.split(r"[,;\s]+", text or "") if p.strip()]
    if not items:
        raise BadInput("--arch needs at least one compute capability, for example --arch 9.0 (H100/H200) or "
                       "--arch 8.0,9.0,10.0.")
    gpus: list[Gpu] = []
    for i, item in enumerate(items):
        m = _FORMS.match(item.lower())
        if not m or int(m.group(1)) < 3:
            raise BadInput(f"--arch: '{item}' is not a CUDA compute capability. Use the major.minor form, "
                           "comma-separated: 8.0 (A100), 8.6 (RTX 30xx/A10), 8.9 (L4/L40), 9.0 (H100/H200), "
                           "10.0 (B200/GB200), 12.0 (RTX 50xx); sm_90 and 90 are accepted too.")
        cap = f"{int(m.group(1))}.{m.group(2)}"
        if any(g.capability == cap for g in gpus):
            continue
        gpus.append(Gpu(name="--arch target", capability=cap, index=i))
    return tuple(gpus)
