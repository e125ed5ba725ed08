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


def test_the_samples_say_their_stack_and_it_is_the_one_the_readme_installs() -> None:
    """The samples came from the CI pins (transformers 5.24 + kernels 0.17.2) while the README's set-up gives 5.25:
    the doctor sample a user compares with differed in 34 lines. They are made on the README's stack, and say so."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import doc_samples
    finally:
        sys.path.pop(0)
    tf, kernels = (r.split("==")[1] for r in doc_samples.README_STACK)
    readme = (REPO / "README.md").read_text()
    assert f"torch\n2.13.0+cpu, transformers {tf} and kernels {kernels}" in readme
    assert "pip install torch==2.13.0" in readme
    doctor = readme.split("<!-- sample: doctor-cpu -->\n```text\n", 1)[1].split("```", 1)[0]
    assert f"transformers {tf} · kernels {kernels}" in doctor
