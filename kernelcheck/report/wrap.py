"""Cutting a word too long for its line (a module path, a kernel's name) without cutting an identifier: only after
a separator (`.`, `/`, `,`, `:`, `(`, `<`, `[`, `=`, `-`), never inside a name of letters, digits and `_`. A piece
that still does not fit moves left under the line (less indent); one longer than the whole width stays whole on
its own line, so a name is never split (copy-paste and grep still find it)."""

from __future__ import annotations

import re

_PIECE = re.compile(r"[^./,:(<\[=-]*(?:[./,:(<\[=-]+|$)")


def pieces(word: str) -> list[str]:
    """`word` cut after each run of separators: the places a line may end inside it."""
    return [p for p in _PIECE.findall(word) if p]


def break_word(word: str, indent: str, width: int, base: int) -> list[str]:
    """Lines of `word`, each starting with `indent`, cut only after separators; a line that does not fit at
    `indent` is moved left (`base` + 2 columns, else 0) when that makes it fit."""
    room = max(width - len(indent), 1)
    lines: list[str] = []
    cur = ""
    for p in pieces(word):
        if cur and len(cur) + len(p) > room:
            lines.append(cur)
            cur = ""
        cur += p
    if cur:
        lines.append(cur)
    return [_placed(text, indent, width, base) for text in lines]


def _placed(text: str, indent: str, width: int, base: int) -> str:
    if len(indent) + len(text) <= width:
        return indent + text
    for col in (base + 2, 0):
        if col + len(text) <= width:
            return " " * col + text
    return text  # longer than the width: whole, on its own line


def clip(text: str, limit: int) -> str:
    """`text` shortened to at most `limit` characters at a word's end, with " ..." where it was cut: an error
    quoted in a line never ends mid-word ("can't keep packed sequences apart w")."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:max(limit - 4, 1) + 1]
    cut = head.rfind(" ")
    return (head[:cut] if cut > 0 else head[:-1]).rstrip(" ,;:") + " ..."
