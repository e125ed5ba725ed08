"""Stream example lengths (tokens) from a job's data file, with bounded memory.

Sources: a lengths file (one integer per line), JSONL (`input_ids`, a `length`-style column, or a text
column tokenized with a local tokenizer folder), Parquet or Arrow (pyarrow, optional).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput

log = logging.getLogger(__name__)

LENGTH_COLUMNS = ("input_ids", "length", "lengths", "num_tokens", "n_tokens")
TEXT_COLUMNS = ("text", "content", "prompt")


class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, total: int, label: str) -> None:
        self.total = max(total, 1)
        self.label = label
        self.on = sys.stderr.isatty()
        self.last = -1

    def update(self, done: int) -> None:
        pct = min(100, done * 100 // self.total)
        if self.on and pct != self.last:
            self.last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar:<25}] {pct:3d}%")
            sys.stderr.flush()

    def close(self) -> None:
        if self.on:
            sys.stderr.write("\n")


def _bad(path: Path, why: str) -> BadInput:
    return BadInput(f"cannot read lengths from {path}: {why}. Give a JSONL, Parquet or Arrow file with an "
                    f"`input_ids` column (or a length column: {', '.join(LENGTH_COLUMNS[1:])}; or a text column "
                    "plus --tokenizer DIR), or a text file with one length per line.")


def _tokenizer(folder: str | None) -> Callable[[str], int] | None:
    if folder is None:
        return None
    if not Path(folder, "tokenizer_config.json").is_file() and not Path(folder, "tokenizer.json").is_file():
        raise BadInput(f"--tokenizer {folder} is not a tokenizer folder (no tokenizer.json or "
                       "tokenizer_config.json). Give a local folder saved with tokenizer.save_pretrained().")
    from transformers import AutoTokenizer

    tok: Any = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return lambda text: len(tok(text, add_special_tokens=True)["input_ids"])


def _value_length(row: dict[str, Any], tokenize: Callable[[str], int] | None) -> int | None:
    for col in LENGTH_COLUMNS:
        if col in row:
            v = row[col]
            return len(v) if isinstance(v, list) else int(v)
    if tokenize is not None:
        for col in TEXT_COLUMNS:
            if col in row and isinstance(row[col], str):
                return tokenize(row[col])
    return None


def _jsonl(path: Path, tokenize: Callable[[str], int] | None) -> Iterator[int]:
    size = os.path.getsize(path)
    bar = Progress(size, path.name)
    done = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            done += len(raw)
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except ValueError as exc:
                raise _bad(path, f"line {lineno} is not JSON ({exc})") from None
            n = _value_length(row, tokenize) if isinstance(row, dict) else None
            if n is None:
                keys = ", ".join(sorted(row)[:8]) if isinstance(row, dict) else type(row).__name__
                raise _bad(path, f"line {lineno} has no length column (keys: {keys})")
            if lineno % 4096 == 0:
                bar.update(done)
            yield n
    bar.update(size)
    bar.close()


def _plain(path: Path) -> Iterator[int]:
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            s = raw.strip()
            if not s:
                continue
            try:
                yield int(s)
            except ValueError:
                raise _bad(path, f"line {lineno} ({s[:40]!r}) is not an integer length") from None


def _arrow(path: Path, tokenize: Callable[[str], int] | None) -> Iterator[int]:
    try:
        import pyarrow as pa  # type: ignore[import-not-found]
        import pyarrow.parquet as pq  # type: ignore[import-not-found]
    except ImportError:
        raise BadInput(f"{path.name} is Parquet/Arrow, which needs pyarrow (not installed): pip install pyarrow, "
                       "or convert the data to JSONL or a lengths file.") from None
    try:
        if path.suffix == ".parquet":
            pf = pq.ParquetFile(path)
            names = pf.schema_arrow.names
            batches: Iterator[Any] = pf.iter_batches(batch_size=8192)
        else:
            try:
                reader = pa.ipc.open_file(pa.memory_map(str(path)))
                batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
            except pa.ArrowInvalid:
                reader = pa.ipc.open_stream(pa.memory_map(str(path)))
                batches = iter(reader)
            names = reader.schema.names
    except (OSError, pa.ArrowException) as exc:
        raise _bad(path, f"not a readable Parquet/Arrow file ({exc})") from None
    col = next((c for c in LENGTH_COLUMNS if c in names), None)
    text = next((c for c in TEXT_COLUMNS if c in names), None) if tokenize else None
    if col is None and text is None:
        raise _bad(path, f"no length column (columns: {', '.join(names[:8])})")
    import pyarrow.compute as pc  # type: ignore[import-not-found]

    for batch in batches:
        if col == "input_ids":
            yield from pc.list_value_length(batch.column(col)).to_pylist()
        elif col is not None:
            yield from (int(v) for v in batch.column(col).to_pylist())
        else:
            assert tokenize is not None and text is not None
            yield from (tokenize(v) for v in batch.column(text).to_pylist())


def stream(path_str: str, tokenizer: str | None = None) -> Iterator[int]:
    """Yield one length per example; BadInput for a file that cannot say its lengths."""
    path = Path(path_str)
    if not path.is_file():
        raise _bad(path, "no such file")
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise _bad(path, f"unreadable ({exc.strerror})") from None
    if not head.strip():
        raise _bad(path, "the file is empty")
    tokenize = _tokenizer(tokenizer)
    if path.suffix in (".parquet", ".arrow", ".feather", ".ipc"):
        return _arrow(path, tokenize)
    if head.lstrip()[:1] in (b"{", b"["):
        return _jsonl(path, tokenize)
    return _plain(path)
