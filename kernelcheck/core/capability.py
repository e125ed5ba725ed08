"""A GPU compute capability as a value: `Capability`, parsed once where it is read (torch, nvidia-smi, --arch, a
report's JSON) and carried as is; each spelling ("9.0", "sm_90", "compute_90", 90) is a property of it.

It lives apart from core/gpu.py (which re-exports it) so that core/environment.py's `Gpu` can hold one: core/gpu.py
builds on the environment.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_FORMS = re.compile(r"^(?:sm_?|compute_)?([0-9]{1,3})(?:\.([0-9]{1,2}))?[af]?$")  # ASCII digits only


@functools.total_ordering
@dataclass(frozen=True)
class Capability:
    """A CUDA compute capability: `Capability.parse("9.0" | "sm_90" | "90" | "9.0a").sm == "sm_90"`."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str | int | Capability) -> Capability:
        """Any of the usual spellings; raises ValueError for anything else (no range check: see core/gpu `known`)."""
        if isinstance(text, Capability):
            return text
        m = _FORMS.match(str(text).strip().lower())
        if not m:
            raise ValueError(f"{text!r} is not a compute capability")
        whole, minor = m.group(1), m.group(2)
        if minor is not None:
            return cls(int(whole), int(minor))
        if len(whole) < 2:
            raise ValueError(f"{text!r} is not a compute capability")
        return cls(int(whole[:-1]), int(whole[-1]))  # "90" -> 9.0, "103" -> 10.3

    @property
    def dotted(self) -> str:
        """"9.0": the form torch and nvidia-smi print and the JSON report carries."""
        return f"{self.major}.{self.minor}"

    @property
    def number(self) -> int:
        """90: kernels' integer form, and the digits of sm_90."""
        return self.major * 10 + self.minor

    @property
    def sm(self) -> str:
        return f"sm_{self.number}"

    @property
    def compute(self) -> str:
        return f"compute_{self.number}"

    def __str__(self) -> str:
        return self.dotted

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Capability):
            return NotImplemented
        return (self.major, self.minor) < (other.major, other.minor)


def sm_name(capability: object) -> str:
    """A report's GPU capability ("9.0", as the JSON carries it) as its SASS name, "sm_90"; a value that is no
    capability (missing, "?") is shown as written after "sm_"."""
    try:
        return Capability.parse(str(capability)).sm
    except ValueError:
        return f"sm_{capability}"
