"""What a length is: a non-negative integer of a plausible size, checked the same way by every reader, and the
one-paragraph errors that name the line or row of a value that is not one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from kernelcheck.core.errors import BadInput

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# A chunk of lengths as the readers yield it: a list, or an int64 array from the vectorized parsers.
Chunk: TypeAlias = "Sequence[int] | NDArray[np.int64]"

LENGTH_COLUMNS = ("input_ids", "length", "lengths", "num_tokens", "n_tokens")
TEXT_COLUMNS = ("text", "content", "prompt")
MAX_LENGTH = 1 << 40  # no example holds a trillion tokens: larger is a wrong column, and int64 sums stay exact
HINT = ("Give a JSONL, Parquet or Arrow file with an `input_ids` column (or a length column: "
        f"{', '.join(LENGTH_COLUMNS[1:])}; or a text column plus --tokenizer DIR), or a text file with one length "
        "per line.")


def bad_file(path: Path, why: str) -> BadInput:
    return BadInput(f"cannot read lengths from {path}: {why}. {HINT}")


def shown(value: Any) -> str:
    """A value as the user wrote it: strings quoted, other JSON values as JSON (null, NaN, Infinity, {...})."""
    if isinstance(value, str | bytes):
        return repr(value[:40])
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def bad_value(path: Path, where: str, column: str, value: Any) -> BadInput:
    if column == "input_ids":
        what = "is not a list of token ids"
    elif isinstance(value, int) and not isinstance(value, bool) and value > MAX_LENGTH:
        what = f"is larger than any example's length ({MAX_LENGTH:,} tokens at most)"
    else:
        what = "is not a non-negative integer"
    return BadInput(f"{path}: {where}: {column} {shown(value)} {what}. A length column holds each example's "
                    "token count (input_ids: the list of its token ids); fix or drop that row, or point kernelcheck "
                    "at the column that holds the lengths.")


def checked(value: Any, column: str, path: Path, where: str) -> int:
    """`value` of `column` as a length, or BadInput naming `where` (line N, row N)."""
    if isinstance(value, list):
        return len(value)
    if column != "input_ids":
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_LENGTH:
            return value
        if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_LENGTH:
            return int(value)
    raise bad_value(path, where, column, value)
