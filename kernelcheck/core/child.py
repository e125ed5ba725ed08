"""What a child process that a command starts (a fresh interpreter: doctor's import children, verify --step's
workers) reads for itself: the matrix. Everything the child calls is passed it, as in the parent."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def load_matrix() -> Matrix:
    """The matrix the parent's Context loaded: the same folder (KERNELCHECK_MATRIX_DIR, inherited with the
    environment, or the shipped data), read once in this process. Only a child's entry point asks this
    (tests/unit/test_architecture.py CHILD_ENTRY_POINTS)."""
    from kernelcheck.core import matrix

    return matrix.load()
