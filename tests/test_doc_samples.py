"""The output samples in README.md and docs/ are what kernelcheck prints today: scripts/doc_samples.py --check
reruns each (or renders the recorded H200 report) and fails with a diff when a doc drifted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_readme_and_docs_samples_match_real_runs() -> None:
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "doc_samples.py"), "--check"], capture_output=True,
                         text=True, cwd=REPO, timeout=900)
    assert res.returncode == 0, "docs drifted from real runs; run `python scripts/doc_samples.py`:\n" + \
        res.stdout[-6000:] + res.stderr[-2000:]


def test_every_sample_has_its_marker_and_the_h200_report_renders() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import doc_samples
    finally:
        sys.path.pop(0)
    for name, s in doc_samples.SAMPLES.items():
        assert f"<!-- sample: {name} -->\n```text\n" in (REPO / s.doc).read_text(), name
    text = doc_samples.produce("doctor-h200-train")
    assert "[fla-640-refuses]" in text and max(map(len, text.splitlines())) <= 100
