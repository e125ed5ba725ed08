"""How text reaches a person at a terminal: wrapped to its width, coloured only on a TTY, or just the verdict.

The text renderers make one logical line per item (stable for logs, grep and tests). `present` adapts that
text to where it goes, and nothing else: JSON never passes through here.

- width: a TTY's width (shutil.get_terminal_size); piped or redirected output is not wrapped.
- colour: `kernelcheck --color auto|always|never`; auto (the default): only on a TTY, never when NO_COLOR is set
  (https://no-color.org) or TERM=dumb; always wins over NO_COLOR (a flag is the user's explicit choice).
- quiet: the verdict line only.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from dataclasses import dataclass
from typing import TextIO

_LABEL = re.compile(r"^(\s*)((?:why|fix|ref|evidence|kernels): "
                    r"|(?:SLOW|BROKEN|info|warn|FAST|FALLBACK)\s+(?:\[[^\]]+\] )?)")
_COLOURS = {"READY": "32", "FAST": "32", "FALLBACK": "33", "SLOW": "33", "BROKEN": "31", "UNSUPPORTED": "33"}
_WORD = re.compile(r"\b(READY|FAST|FALLBACK|SLOW|BROKEN|UNSUPPORTED)\b")


COLOR_CHOICES = ("auto", "always", "never")
_COLOR = {"choice": "auto"}


def set_color(choice: str) -> None:
    """`kernelcheck --color CHOICE` (auto | always | never)."""
    _COLOR["choice"] = choice


@dataclass(frozen=True)
class Terminal:
    width: int | None = None  # None: do not wrap
    colour: bool = False
    quiet: bool = False

    @classmethod
    def detect(cls, stream: TextIO, quiet: bool = False) -> Terminal:
        tty = bool(getattr(stream, "isatty", lambda: False)())
        width = shutil.get_terminal_size((80, 24)).columns if tty else None
        colour = {"always": True, "never": False}.get(
            _COLOR["choice"], tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb")
        return cls(width=max(width, 40) if width else None, colour=colour, quiet=quiet)


def present(text: str, term: Terminal) -> str:
    lines = text.splitlines()
    if term.quiet:
        lines = [ln for ln in lines if ln.startswith("verdict")][-1:] or lines[-1:]
    if term.width:
        lines = [w for ln in lines for w in wrap_line(ln, term.width)]
    if term.colour:
        lines = [_paint(ln) for ln in lines]
    return "\n".join(lines)


def wrap_line(line: str, width: int) -> list[str]:
    """One logical line as lines of at most `width`, continuations indented under the text after its label."""
    if len(line) <= width:
        return [line]
    m = _LABEL.match(line)
    indent = len(m.group(0)) if m else len(line) - len(line.lstrip())
    if indent > width // 2:
        indent = len(line) - len(line.lstrip()) + 2
    return textwrap.wrap(line, width=width, subsequent_indent=" " * indent, break_on_hyphens=False,
                         break_long_words=True) or [line]


def _paint(line: str) -> str:
    if line.startswith("verdict"):
        return _WORD.sub(lambda m: f"\033[1;{_COLOURS[m.group(1)]}m{m.group(1)}\033[0m", line, count=1)
    stripped = line.lstrip()
    m = _WORD.match(stripped)
    if m:
        pad = line[: len(line) - len(stripped)]
        return f"{pad}\033[{_COLOURS[m.group(1)]}m{m.group(1)}\033[0m{stripped[m.end():]}"
    return line
