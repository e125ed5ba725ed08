"""What an entry point reads for itself, in one place: the matrix. A command's entry is its Context
(commands/context.py `Context.matrix`); a child process that a command starts in a fresh interpreter (doctor's
import children, verify --step's workers) holds no parent's matrix, so its entry point reads its own here. Everything
either calls is passed the matrix (and reads the trace signatures as its `signatures`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def matrix() -> Matrix:
    """The matrix this process decides on: KERNELCHECK_MATRIX_DIR's folder (a child inherits it with the
    environment) or the shipped data, read once per process and folder. The one caller of core/matrix.py `load()`;
    only a Context and a child's entry point ask this (tests/unit/test_architecture.py MATRIX_READERS)."""
    from kernelcheck.core import matrix as matrix_data

    return matrix_data.load()


def data_date() -> str | None:
    """matrix/data.toml `updated` (YYYY-MM-DD) of the same folder as `matrix()`, for `kernelcheck --version` and the
    issue report's header (core/version.py): said where no command runs, so no matrix is loaded for it; this one
    small file is read instead."""
    from kernelcheck.core import matrix as matrix_data
    from kernelcheck.core import matrix_shape

    return str(matrix_shape.read_toml(matrix_data.folder() / "data.toml").get("updated") or "") or None
