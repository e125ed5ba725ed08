"""The library examples in the docs run: docs/trace.md and docs/hub.md are doctests (their `>>>` lines and
the output shown), so an example that raises AttributeError/ImportError or prints something else fails here."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_trace_library_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the example reads tests/data/gpu/ from the repository root
    res = doctest.testfile(str(REPO / "docs" / "trace.md"), module_relative=False, optionflags=FLAGS)
    assert res.attempted >= 8 and res.failed == 0


@pytest.mark.integration
def test_the_hub_library_examples_run(tmp_path: Path) -> None:
    # a process of its own: an empty Hugging Face cache and HF_HUB_OFFLINE are read when huggingface_hub loads
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    res = subprocess.run([sys.executable, "-m", "doctest", "-o", "NORMALIZE_WHITESPACE", "-o", "ELLIPSIS",
                          str(REPO / "docs" / "hub.md")], capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert ">>>" in (REPO / "docs" / "hub.md").read_text()
