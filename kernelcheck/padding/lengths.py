"""Stream example lengths (tokens) from a job's data file, with bounded memory, in chunks.

Sources: a lengths file (one integer per line; padding/plaintext.py parses it vectorized), JSONL (`input_ids`, a
`length`-style column, or a text column tokenized with a local tokenizer folder), Parquet or Arrow (pyarrow,
optional; padding/columnar.py). Every value is checked: a length that is not a non-negative integer (a string,
null, NaN, 1e400, a negative number, an object) is bad input naming its line or row, never an internal error
and never dropped silently. Each reader shows progress on stderr (report/progress.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kernelcheck.core import paths
from kernelcheck.core.errors import BadInput
from kernelcheck.padding.values import HINT, LENGTH_COLUMNS, MAX_LENGTH, TEXT_COLUMNS, Chunk, bad_file, checked
from kernelcheck.report.progress import Progress

log = logging.getLogger(__name__)

try:
    import numpy as np
except ImportError:  # pragma: no cover - transformers requires numpy
    np = None  # type: ignore[assignment]
_ARROW_SUFFIXES = (".parquet", ".arrow", ".feather", ".ipc")


def _tokenizer(folder: str | None) -> Callable[[str], int] | None:
    """A local tokenizer folder as a text -> length function; a folder transformers cannot load is bad input."""
    if folder is None:
        return None
    if not Path(folder, "tokenizer_config.json").is_file() and not Path(folder, "tokenizer.json").is_file():
        raise BadInput(f"--tokenizer {folder} is not a tokenizer folder (no tokenizer.json or "
                       "tokenizer_config.json). Give a local folder saved with tokenizer.save_pretrained().")
    from transformers import AutoTokenizer

    try:
        tok: Any = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a damaged folder is data: any failure to load it is bad input
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise BadInput(f"--tokenizer {folder}: transformers cannot load this tokenizer ({detail}). Check that "
                       "tokenizer.json / tokenizer_config.json are the files tokenizer.save_pretrained() wrote "
                       "(valid JSON, a tokenizer_class this transformers knows), or give the lengths instead "
                       "(input_ids or a length column).") from None

    def length(text: str) -> int:
        try:
            return len(tok(text, add_special_tokens=True)["input_ids"])
        except Exception as exc:  # noqa: BLE001 - a tokenizer that fails on the data is bad input too
            raise BadInput(f"--tokenizer {folder} failed on the data ({type(exc).__name__}: {exc}). Give a "
                           "tokenizer that loads with transformers, or the lengths themselves.") from None

    return length


def _value_length(row: dict[str, Any], tokenize: Callable[[str], int] | None, path: Path, where: str) -> int | None:
    for col in LENGTH_COLUMNS:
        if col in row:
            return checked(row[col], col, path, where)
    if tokenize is not None:
        for col in TEXT_COLUMNS:
            if col in row and isinstance(row[col], str):
                return tokenize(row[col])
    return None


def _row(raw: bytes, path: Path, lineno: int) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, and bytes that are not UTF-8
        raise bad_file(path, f"line {lineno} is not JSON ({exc})") from None
    except RecursionError:
        raise bad_file(path, f"line {lineno} nests JSON too deeply to be a row of data") from None


# A row that starts with its length, as `{"length": N, ...}` (N a plain JSON integer): json would read N as its length
# when the row holds no "input_ids" (which comes first) and no second "length" key (json keeps the last one).
_LENGTH_FIRST = re.compile(rb'\n\{"length": (0|[1-9][0-9]{0,12})[,}]')
BLOCK = 4 << 20


def _length_rows(block: bytes, rows: int) -> Any:
    """The lengths of a block of `rows` JSONL rows (whole lines) read without decoding them, or None when a row is
    not of that shape (then each row is decoded). Only the length is read: the rest of a row is not checked."""
    if np is None or b'"input_ids"' in block or block.count(b'"length"') != rows or block.count(b"}\n") != rows:
        return None
    found = _LENGTH_FIRST.findall(b"\n" + block)  # each row after a newline: a literal the search skips to
    if len(found) != rows:
        return None
    values = np.array(found, dtype=np.int64) if found else np.empty(0, dtype=np.int64)
    if values.size and int(values.max()) > MAX_LENGTH:
        return None
    return values


def _jsonl(path: Path, tokenize: Callable[[str], int] | None) -> Iterator[Sequence[int]]:
    """Rows in blocks of whole lines: a block whose rows all start with their length is read in C (_length_rows),
    any other block row by row, each decoded."""
    bar = Progress(os.path.getsize(path), path.name)
    done = 0
    lineno = 0
    rest = b""
    with path.open("rb") as fh:
        while data := fh.read(BLOCK):
            done += len(data)
            data = rest + data
            cut = data.rfind(b"\n") + 1
            block, rest = data[:cut], data[cut:]
            if block:
                rows = block.count(b"\n")
                fast = _length_rows(block, rows) if tokenize is None else None
                out = fast if fast is not None else _rows(block, path, lineno, tokenize)
                if len(out):
                    yield out
                lineno += rows
            bar.update(done)
    if rest:
        out = _rows(rest + b"\n", path, lineno, tokenize)
        if out:
            yield out
    bar.update(done)
    bar.close()


def _rows(block: bytes, path: Path, lineno: int, tokenize: Callable[[str], int] | None) -> list[int]:
    """Each row of a block decoded (lines after `lineno`): its length, or BadInput naming the line."""
    out: list[int] = []
    for offset, raw in enumerate(block.split(b"\n")[:-1], lineno + 1):
        if not raw.strip():
            continue
        row = _row(raw, path, offset)
        n = _value_length(row, tokenize, path, f"line {offset}") if isinstance(row, dict) else None
        if n is None:
            keys = ", ".join(sorted(row)[:8]) if isinstance(row, dict) else type(row).__name__
            raise bad_file(path, f"line {offset} has no length column (keys: {keys})")
        out.append(n)
    return out


def chunks(path_str: str, tokenizer: str | None = None) -> Iterator[Chunk]:
    """Yield the lengths in chunks (numpy arrays or lists), one per example, in file order; BadInput for a file
    that cannot say its lengths (checked before the first chunk: the file's kind, its first bytes, the tokenizer)."""
    path = paths.regular_file(path_str, "the data", HINT)
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise bad_file(path, f"unreadable ({exc.strerror})") from None
    if not head.strip():
        raise bad_file(path, "the file is empty")
    tokenize = _tokenizer(tokenizer)
    if path.suffix in _ARROW_SUFFIXES:
        from kernelcheck.padding import columnar

        return columnar.chunks(path, tokenize)
    if head.lstrip()[:1] in (b"{", b"["):
        return _jsonl(path, tokenize)
    from kernelcheck.padding import plaintext

    return plaintext.chunks(path)


def stream(path_str: str, tokenizer: str | None = None) -> Iterator[int]:
    """Yield one length per example (the chunks of `chunks`, flattened)."""
    for chunk in chunks(path_str, tokenizer):
        yield from (int(n) for n in chunk)
