"""The output samples in README.md and docs/ are what kernelcheck prints today: scripts/doc_samples.py --check
reruns each (or renders the recorded H200 report) and fails with a diff when a doc drifted."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_sample_has_its_marker_and_the_h200_report_renders() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import doc_samples
    finally:
        sys.path.pop(0)
    for name, s in doc_samples.SAMPLES.items():
        assert f"<!-- sample: {name} -->\n```text\n" in (REPO / s.doc).read_text(), name
    text = doc_samples.produce("doctor-h200-train")
    assert "[fla-640-refuses]" in text and max(map(len, text.splitlines())) <= 100  # wording: the docs' text
