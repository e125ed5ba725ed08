"""The library examples in the docs run: docs/trace.md and docs/hub.md are doctests (their `>>>` lines and
the output shown), so an example that raises AttributeError/ImportError or prints something else fails here."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_trace_library_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the example reads tests/data/gpu/ from the repository root
    res = doctest.testfile(str(REPO / "docs" / "trace.md"), module_relative=False, optionflags=FLAGS)
    assert res.attempted >= 8 and res.failed == 0
