"""The integration half of tests/unit/test_docs_examples.py: processes, pip or builds (the in-process tests
are there).

The library examples in the docs run: docs/trace.md and docs/hub.md are doctests (their `>>>` lines and"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_docs_examples import (  # helpers and fixtures of the in-process half
    REPO,
)


@pytest.mark.integration
def test_the_hub_library_examples_run(tmp_path: Path) -> None:
    # a process of its own: an empty Hugging Face cache and HF_HUB_OFFLINE are read when huggingface_hub loads
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    res = subprocess.run([sys.executable, "-m", "doctest", "-o", "NORMALIZE_WHITESPACE", "-o", "ELLIPSIS",
                          str(REPO / "docs" / "hub.md")], capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert ">>>" in (REPO / "docs" / "hub.md").read_text()
