"""How text reaches a person at a terminal: wrapped to its width, coloured only on a TTY, or just the verdict.

The text renderers make one logical line per item (stable for logs, grep and tests). `present` adapts that
text to where it goes, and nothing else: JSON never passes through here.

- width: a TTY's width (shutil.get_terminal_size); piped or redirected output is wrapped to $COLUMNS when it
  is exported, else to 100 columns (CI logs, `| less`, a pasted issue).
- commands are never split: a backticked span, or the command that starts a `fix:`/`run:` line, moves to
  the next line whole, moved left when it does not fit under its label; one longer than the width stays
  whole on its own line (copy-paste still works).
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

_LABEL = re.compile(r"^(\s*)((?:why|fix|ref|evidence|kernels|hub|cache|functions|model_type): "
                    r"|(?:SLOW|BROKEN|info|warn|WARN|FAST|FALLBACK)\s+(?:\[[^\]]+\] )?|[a-z]+ {2,})")
PIPED_WIDTH = 100
_COMMAND_LABEL = re.compile(r"^\s*(?:fix|run|why, fix|fix \(\w+\)): ")
_BACKTICKED = re.compile(r"`[^`]+`")
_COMMAND_WORD = re.compile(r"^(?:pip|python3?|kernelcheck|uv|conda|apt-get|export|torchrun|[A-Z][A-Z0-9_]*=\S*) ")
_GLUE = "\x00"  # joins a command's words so textwrap sees one word
_COLOURS = {"READY": "32", "FAST": "32", "FALLBACK": "33", "SLOW": "33", "BROKEN": "31"}
_WORD = re.compile(r"\b(READY|FAST|FALLBACK|SLOW|BROKEN)\b")


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
        width = shutil.get_terminal_size((80, 24)).columns if tty else _piped_width()
        colour = {"always": True, "never": False}.get(
            _COLOR["choice"], tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb")
        return cls(width=max(width, 40) if width else None, colour=colour, quiet=quiet)


def _piped_width() -> int:
    cols = os.environ.get("COLUMNS", "")
    return int(cols) if cols.isdigit() and int(cols) >= 40 else PIPED_WIDTH


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
    glued = _glue_commands(line, width)
    pad = " " * indent
    out = textwrap.wrap(glued, width=width, subsequent_indent=pad, break_on_hyphens=False,
                        break_long_words=False) or [glued]
    # a word too long for the width is cut after a separator (a module path), never inside an identifier
    # (report/wrap.py); a command stays whole
    base = len(line) - len(line.lstrip())
    fixed = [w for ln in out for w in (
        [ln] if len(ln) <= width or _GLUE in ln or "`" in ln else _cut_long(ln, pad, width, base))]
    # a command that does not fit under the label moves left (the line's own indent + 2, else none), whole
    fixed = [_shift_left(ln, width, base) if len(ln) > width and ln.startswith(pad) and _GLUE in ln else ln
             for ln in fixed]
    return [ln.replace(_GLUE, " ") for ln in fixed]


def _cut_long(ln: str, pad: str, width: int, base: int) -> list[str]:
    """A wrapped line still over the width: its words that fit stay, the long word is cut by report/wrap.py."""
    from kernelcheck.report.wrap import break_word

    lead = ln[:len(ln) - len(ln.lstrip())]
    words = ln.lstrip().split(" ")
    head = words[:-1]
    out: list[str] = []
    if head:
        out.append(lead + " ".join(head))
        lead = pad
    return out + break_word(words[-1], lead, width, base)


def _shift_left(ln: str, width: int, base: int) -> str:
    text = ln.lstrip()
    for indent in (base + 2, 0):
        if indent + len(text) <= width:
            return " " * indent + text
    return ln


# a call written out (`DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)`): one word, so
# a line never ends inside its parentheses
_CALL = re.compile(r"\b[A-Za-z_][\w.]*\([^()`]*\)")


def _glue_commands(line: str, width: int = 100) -> str:
    """The words of each command in `line` joined into one textwrap word: backticked spans, calls, and the command
    that opens a `fix:`/`run:` line when it starts with a command word (up to two spaces or " (", where the
    explanation starts)."""
    line = _BACKTICKED.sub(lambda m: m.group(0).replace(" ", _GLUE), line)
    if line.startswith("kernelcheck ") and " · " in line:  # a headline breaks between its parts only
        parts = line.split(" · ")
        line = " ".join(p.replace(" ", _GLUE) + (_GLUE + "·" if i < len(parts) - 1 else "")
                        if len(p) <= width // 2 else p + (" ·" if i < len(parts) - 1 else "")
                        for i, p in enumerate(parts))
    line = _CALL.sub(lambda m: m.group(0).replace(" ", _GLUE) if len(m.group(0)) <= width - 4 else m.group(0), line)
    m = _COMMAND_LABEL.match(line)
    if m and _COMMAND_WORD.match(line[m.end():]):
        rest = line[m.end():]
        cut = min((i for i in (rest.find("  "), rest.find(" (")) if i > 0), default=len(rest))
        line = line[:m.end()] + rest[:cut].replace(" ", _GLUE) + rest[cut:]
    return line


def _paint(line: str) -> str:
    if line.startswith("verdict"):
        return _WORD.sub(lambda m: f"\033[1;{_COLOURS[m.group(1)]}m{m.group(1)}\033[0m", line, count=1)
    stripped = line.lstrip()
    m = _WORD.match(stripped)
    if m:
        pad = line[: len(line) - len(stripped)]
        return f"{pad}\033[{_COLOURS[m.group(1)]}m{m.group(1)}\033[0m{stripped[m.end():]}"
    return line
