"""The integration half of tests/unit/test_doc_samples.py: processes, pip or builds (the in-process tests
are there).

The output samples in README.md and docs/ are what kernelcheck prints today: scripts/doc_samples.py --check"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.test_doc_samples import (  # helpers and fixtures of the in-process half
    REPO,
)


@pytest.mark.integration
def test_readme_and_docs_samples_match_real_runs() -> None:
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "doc_samples.py"), "--check"], capture_output=True,
                         text=True, cwd=REPO, timeout=900)
    assert res.returncode == 0, "docs drifted from real runs; run `python scripts/doc_samples.py`:\n" + \
        res.stdout[-6000:] + res.stderr[-2000:]
