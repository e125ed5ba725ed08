"""Parquet and Arrow (IPC file or stream) data through pyarrow, one record batch at a time, checked vectorized.

pyarrow is optional: without it such a file is bad input saying so. A length column must be integers (or
floats holding whole numbers) with no nulls, none negative, none absurdly large; `input_ids` must be a list
column. The first bad value is named by its row (1-based, in file order) and shown as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput
from kernelcheck.padding.values import LENGTH_COLUMNS, MAX_LENGTH, TEXT_COLUMNS, bad_file, bad_value, shown
from kernelcheck.report.progress import Progress

log = logging.getLogger(__name__)
BATCH_ROWS = 65536


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.compute  # pa.compute below
        import pyarrow.parquet  # pa.parquet below
    except ImportError:
        return None
    return pa


def _open(pa: Any, path: Path) -> tuple[list[str], Iterator[Any], int, str]:
    """Column names, the record batches, and the total for progress (rows or batches) with its unit."""
    if path.suffix == ".parquet":
        pf = pa.parquet.ParquetFile(path)
        return pf.schema_arrow.names, pf.iter_batches(batch_size=BATCH_ROWS), pf.metadata.num_rows, "rows"
    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path)))
        batches: Iterator[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
        return reader.schema.names, batches, reader.num_record_batches, "batches"
    except pa.ArrowInvalid:
        stream = pa.ipc.open_stream(pa.memory_map(str(path)))
        return stream.schema.names, iter(stream), 0, "batches"


def _first(mask: Any) -> int:
    import numpy as np

    return int(np.flatnonzero(mask)[0])


def _list_lengths(pa: Any, arr: Any, path: Path, row: int) -> Any:
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        raise bad_value(path, f"row {row} (a column of {arr.type})", "input_ids", arr[0].as_py())
    if arr.null_count:
        i = _first(arr.is_null().to_numpy(zero_copy_only=False))
        raise bad_value(path, f"row {row + i}", "input_ids", None)
    return pa.compute.list_value_length(arr).to_numpy().astype("int64")


def _numbers(pa: Any, arr: Any, name: str, path: Path, row: int) -> Any:
    import numpy as np

    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        value = arr[0].as_py() if len(arr) else None
        raise bad_value(path, f"row {row} (a column of {arr.type})", name, value)
    if arr.null_count:
        i = _first(arr.is_null().to_numpy(zero_copy_only=False))
        raise bad_value(path, f"row {row + i}", name, None)
    vals = arr.to_numpy()
    with np.errstate(invalid="ignore"):
        bad = ~((vals >= 0) & (vals <= MAX_LENGTH))
        if pa.types.is_floating(arr.type):
            bad |= ~np.isfinite(vals) | (np.floor(vals) != vals)
    if bad.any():
        i = _first(bad)
        raise bad_value(path, f"row {row + i}", name, vals[i].item())
    return vals.astype(np.int64)


def _texts(arr: Any, name: str, tokenize: Callable[[str], int], path: Path, row: int) -> list[int]:
    out = []
    for i, v in enumerate(arr.to_pylist()):
        if not isinstance(v, str):
            raise BadInput(f"{path}: row {row + i}: {name} {shown(v)} is not text; the tokenizer counts tokens of "
                           "text. Fix or drop that row.")
        out.append(tokenize(v))
    return out


def chunks(path: Path, tokenize: Callable[[str], int] | None) -> Iterator[Sequence[int]]:
    pa = _pyarrow()
    if pa is None:
        raise BadInput(f"{path.name} is Parquet/Arrow, which needs pyarrow (not installed): pip install pyarrow, "
                       "or convert the data to JSONL or a lengths file.")
    try:
        names, batches, total, unit = _open(pa, path)
    except (OSError, pa.ArrowException) as exc:
        raise bad_file(path, f"not a readable Parquet/Arrow file ({exc})") from None
    col = next((c for c in LENGTH_COLUMNS if c in names), None)
    text = next((c for c in TEXT_COLUMNS if c in names), None) if tokenize else None
    if col is None and text is None:
        raise bad_file(path, f"no length column (columns: {', '.join(names[:8])})")
    return _batches(pa, path, batches, Progress(total, path.name, unit=unit), col, text, tokenize)


def _batches(pa: Any, path: Path, batches: Iterator[Any], bar: Progress, col: str | None, text: str | None,
             tokenize: Callable[[str], int] | None) -> Iterator[Sequence[int]]:
    row, done = 1, 0
    try:
        for batch in batches:
            if col == "input_ids":
                yield _list_lengths(pa, batch.column(col), path, row)
            elif col is not None:
                yield _numbers(pa, batch.column(col), col, path, row)
            else:
                assert tokenize is not None and text is not None
                yield _texts(batch.column(text), text, tokenize, path, row)
            row += batch.num_rows
            done += batch.num_rows if bar.unit == "rows" else 1
            bar.update(done)
    except (OSError, pa.ArrowException) as exc:
        raise bad_file(path, f"damaged at row {row} ({exc})") from None
    bar.close()
