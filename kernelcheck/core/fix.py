"""A fix as a value: what a report prints under `fix:`, and what that command does, read from it once.

A fix is printed as it is written ("pip install 'fla-core>=0.6.0' tilelang  (or allow a triton change:
triton>=3.7.1)"), so `Fix` is that text: a `str`, as the status words are StrEnums, so a report's JSON and text
print the very same string and a fix read back from JSON equals the one built in-process. What it holds beyond the
text is read from it on first use and kept:

- `command`: the command alone, as a user types it (`pip install 'fla-core>=0.6.0' tilelang`);
- `note`: the words after it (`(or allow a triton change: triton>=3.7.1)`), "" when there are none;
- `change`: what a `pip install` / `pip uninstall` command does to the environment (a `Change`), None for any other
  fix (run on a GPU, kernelcheck install): what doctor/fixcheck.py simulates before the fix is printed.

>>> fix = Fix("pip install 'fla-core>=0.6.0' tilelang  (or allow a triton change: triton>=3.7.1)")
>>> fix.command, fix.note
("pip install 'fla-core>=0.6.0' tilelang", '(or allow a triton change: triton>=3.7.1)')
>>> fix.change.install
(('fla-core', '0.6.0'), ('tilelang', None))
>>> Fix("run on a machine with an NVIDIA GPU").change is None
True
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cached_property

from packaging.requirements import InvalidRequirement, Requirement

_COMMENT = re.compile(r"\s{2,}\(|\s+\(|,\s+or\s|;\s")  # where a fix's words after its command start


@dataclass(frozen=True)
class Change:
    """What a fix command does to the environment."""

    command: str  # the command alone, as printed
    install: tuple[tuple[str, str | None], ...] = ()  # (distribution, the lowest version its specifier allows)
    uninstall: tuple[str, ...] = ()


class Fix(str):
    """A printed fix: its text, with its command, note and environment change read from it (the module text)."""

    @classmethod
    def of(cls, text: str | None) -> Fix | None:
        """`text` as a Fix (itself when it is one already, its parts read once); None stays None."""
        return text if text is None or isinstance(text, Fix) else cls(text)

    @cached_property
    def _split(self) -> tuple[str, str]:
        text = self.strip()
        found = _COMMENT.search(text)
        return (text, "") if found is None else (text[:found.start()].strip(), text[found.start():].strip())

    @property
    def command(self) -> str:
        """The command alone: the text up to where its explanation starts (two spaces or " (", ", or ", "; ")."""
        return self._split[0]

    @property
    def note(self) -> str:
        """The words after the command, "" when the fix is the command alone."""
        return self._split[1]

    @cached_property
    def change(self) -> Change | None:
        """The environment change of a `pip install` / `pip uninstall` fix; None for any other kind of fix."""
        try:
            words = shlex.split(self.command)
        except ValueError:
            return None
        if words[:1] in (["python"], ["python3"]) and words[1:3] == ["-m", "pip"]:
            words = words[2:]
        if len(words) < 3 or words[0] != "pip" or words[1] not in ("install", "uninstall"):
            return None
        names = [w for w in words[2:] if not w.startswith("-")]
        if words[1] == "uninstall":
            return Change(self.command, uninstall=tuple(normalized(n) for n in names))
        out = []
        for spec in names:
            try:
                req = Requirement(spec)
            except InvalidRequirement:
                return None
            out.append((normalized(req.name), lowest_version(req)))
        return Change(self.command, install=tuple(out))


def normalized(name: str) -> str:
    """A distribution name as pip compares it (PEP 503): `Flash_Linear.Attention` -> `flash-linear-attention`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lowest_version(req: Requirement) -> str | None:
    """The version pip would be held to at the low end (==X or >=X), None when the specifier does not say."""
    for s in req.specifier:
        if s.operator in ("==", ">=", "~=", "==="):
            return s.version.rstrip(".*")
    return None
