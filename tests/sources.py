"""Parsed sources, once per test run: many fast-lane tests walk every module of the package (one home per
concept, import layers, who decides); parsing 150 files again for each of them cost seconds of CPU."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def tree(path: Path) -> ast.Module:
    """The module at `path`, parsed; the same tree while the file is unchanged (read-only: do not edit it)."""
    st = path.stat()
    return _parsed(str(path), st.st_mtime_ns, st.st_size)


@functools.cache
def _parsed(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))
