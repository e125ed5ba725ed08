"""The torch build (and Python) a plan is for, when it is not this machine's: --torch, --cuda, --python
(cli/targets.py adds the flags to hub and install; install/target_env.py builds the environment)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelcheck.core.errors import BadInput

_MM = re.compile(r"[0-9]+\.[0-9]+")  # ASCII digits only: \d would take '٢.١١' (Arabic-Indic) as a version
# The builds a plan can be for: the kernel packages need torch 2, CUDA 11 and a Python 3 that pip still serves;
# anything outside is a typo or a machine no plan fits (torch 0.1, CUDA 99, Python 2.7).
_RANGES = {"--torch": ((2, 0), (3, 0), "a torch 2.x minor such as 2.11"),
           "--cuda": ((11, 0), (20, 0), "a CUDA 11, 12 or 13 minor such as 13.0, or cpu"),
           "--python": ((3, 9), (4, 0), "a CPython 3 minor of 3.9 or later such as 3.12")}


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
        if val is None:
            continue
        if not _MM.fullmatch(val):
            raise BadInput(f"{name} {val!r} is not MAJOR.MINOR in ASCII digits (e.g. --torch 2.11 --cuda 13.0 "
                           "--python 3.12 --arch 9.0).")
        low, high, words = _RANGES[name]
        if not low <= tuple(int(p) for p in val.split(".")) < high:
            raise BadInput(f"{name} {val} is no build a plan can be for: give {words}.")
    return TargetBuild(torch_v, "" if cuda_v == "cpu" else cuda_v, python_v)
