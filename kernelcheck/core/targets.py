"""The torch build (and Python) a plan is for, when it is not this machine's: --torch, --cuda, --python
(cli/targets.py adds the flags to hub and install; install/target_env.py builds the environment)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelcheck.core.errors import BadInput

_MM = re.compile(r"\d+\.\d+")


@dataclass(frozen=True)
class TargetBuild:
    """The torch build (and Python) to plan for; None fields are this machine's."""

    torch: str | None = None  # "2.11"
    cuda: str | None = None  # "13.0", "" for a CPU build
    python: str | None = None  # "3.12"

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.torch, self.cuda, self.python))


def parse_target(torch_v: str | None, cuda_v: str | None, python_v: str | None = None) -> TargetBuild:
    """The flags as a TargetBuild; BadInput for a value that is not MAJOR.MINOR."""
    for name, val in (("--torch", torch_v), ("--cuda", None if cuda_v == "cpu" else cuda_v), ("--python", python_v)):
        if val is not None and not _MM.fullmatch(val):
            raise BadInput(f"{name} '{val}' is not MAJOR.MINOR (e.g. --torch 2.11 --cuda 13.0 --python 3.12 "
                           "--arch 9.0).")
    return TargetBuild(torch_v, "" if cuda_v == "cpu" else cuda_v, python_v)
