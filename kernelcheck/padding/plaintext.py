"""A lengths file (one integer per line) read in blocks and parsed vectorized with numpy.

numpy comes with transformers (a dependency of kernelcheck), so it is always here in practice; without it
the same checks run line by line (slower). A block holding only digits and newlines is parsed in numpy,
one digit position at a time (lines are short); any other byte (a minus sign, a letter, a space, a
carriage return) sends that block through the line-by-line parser, which accepts surrounding whitespace and
names the first bad line. Memory: one block (4 MiB) and its arrays, whatever the file size.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kernelcheck.padding.values import MAX_LENGTH, Chunk, bad_file, bad_value
from kernelcheck.report.progress import Progress

log = logging.getLogger(__name__)

BLOCK = 4 << 20
_MAX_DIGITS = 13  # MAX_LENGTH (2^40) has 13 digits: longer lines take the checked path
_ALLOWED = b"0123456789\n"
_LONGEST_LINE = 64 << 10
NEWLINE = b"\n"

try:
    import numpy as np
except ImportError:  # pragma: no cover - transformers requires numpy
    np = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from numpy.typing import NDArray


def _slow(block: bytes, path: Path, first_line: int) -> list[int]:
    """Line by line: whitespace around a number is fine; anything else names its line."""
    out: list[int] = []
    for offset, raw in enumerate(block.split(b"\n")):
        s = raw.strip()
        if not s:
            continue
        lineno = first_line + offset
        try:
            n = int(s)
        except ValueError:
            raise bad_file(path, f"line {lineno} ({s[:40]!r}) is not an integer length") from None
        if not 0 <= n <= MAX_LENGTH:
            raise bad_value(path, f"line {lineno}", "length", n)
        out.append(n)
    return out


def _fast(block: bytes) -> NDArray[np.int64] | None:
    """The lengths in a block of digits and newlines (ending with a newline), or None when a line is too long."""
    buf = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    digits = ends - starts
    keep = digits > 0
    if not keep.all():  # blank lines
        ends, digits = ends[keep], digits[keep]
    if not digits.size:
        return np.empty(0, dtype=np.int64)
    longest = int(digits.max())
    if longest > _MAX_DIGITS:
        return None
    values = (buf[ends - 1] - 48).astype(np.int64)
    scale = 1
    for k in range(1, longest):
        scale *= 10
        has = digits > k
        idx = np.where(has, ends - 1 - k, 0)
        values += np.where(has, buf[idx].astype(np.int64) - 48, 0) * scale
    return values


def _numbers(block: bytes, lines: int) -> NDArray[np.int64] | None:
    """numpy's C parser for a block of `lines` digit lines (checked: one value per newline, so a blank line
    sends the block to _fast)."""
    if block.startswith(NEWLINE):
        return _fast(block)
    try:
        values = np.fromstring(block, dtype=np.int64, sep="\n")
    except (ValueError, DeprecationWarning):  # a numpy without the text mode: the portable parser
        return _fast(block)
    if values.size != lines or int(values.size and values.min()) < 0:
        return _fast(block)  # blank lines, or lines of 19+ digits that wrap around in int64: _fast says which
    return values


def _parse(block: bytes, path: Path, first_line: int, lines: int | None = None) -> Chunk:
    if np is not None and not block.translate(None, _ALLOWED):
        values = _numbers(block, block.count(NEWLINE) if lines is None else lines)
        if values is not None:
            if values.size and int(values.max()) > MAX_LENGTH:
                return _slow(block, path, first_line)  # names the line
            return values
    return _slow(block, path, first_line)


def chunks(path: Path) -> Iterator[Chunk]:
    """The file's lengths, one chunk per block of about 4 MiB, with a progress line on stderr."""
    bar = Progress(os.path.getsize(path), path.name)
    done = 0
    line = 1
    rest = b""
    with path.open("rb") as fh:
        while True:
            data = fh.read(BLOCK)
            if not data:
                break
            done += len(data)
            data = rest + data
            cut = data.rfind(b"\n") + 1
            block, rest = data[:cut], data[cut:]
            if len(rest) > _LONGEST_LINE:
                at = line + block.count(NEWLINE)
                raise bad_file(path, f"line {at} is longer than {_LONGEST_LINE >> 10} KiB (a lengths file has one "
                               "number per line)")
            if block:
                lines = block.count(NEWLINE)  # once: the parser checks its value count against it
                yield _parse(block, path, line, lines)
                line += lines
            bar.update(done)
    if rest:
        yield _parse(rest + b"\n", path, line)
    bar.update(done)
    bar.close()
