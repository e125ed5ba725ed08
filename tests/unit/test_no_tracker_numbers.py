"""The product and its tests speak of what the code does, never of this project's own tracker: no "issue N item M",
"(#N)" or "Issue N:" in kernelcheck/, docs/, matrix/, examples/, README.md, CONTRIBUTING.md or tests/. An
upstream reference names its repository (`fla#640`, `transformers#46333`, `tile-ai/TileOPs#473`) and stays."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sources import REPO, repo_files

SCANNED = ("kernelcheck/", "docs/", "matrix/", "examples/", "tests/", "README.md", "CONTRIBUTING.md")
# a record under docs/measurements/ holds what a command printed, as it printed it: its prose (*.md) is scanned
RECORD_SUFFIXES = {".json", ".txt", ".err", ".log", ".csv", ".jsonl", ".tgz", ".svg"}
# "issue N", "Issues N", "issue #N", "Issue-N"; a bare "#N" (a repository's own name before the # makes it an
# upstream reference: fla#640, owner/repo#N); six hex digits (#222222) are a colour, not a number
INTERNAL = re.compile(r"(?<![\w/.-])[Ii]ssues?[ -]#?\d+|(?<![\w/.\-#)\]&])#\d{1,5}\b")
# text quoted as another program printed it (fla's RuntimeError), and a test's input value
QUOTED = ("see #640", r"see #640\\)", '"wh #1"')


def internal_references(text: str) -> list[str]:
    """Each internal tracker reference in `text`, as written, outside the quoted texts."""
    out = []
    for line in text.splitlines():
        for quote in QUOTED:
            line = line.replace(quote, "")
        out += [m.group(0) for m in INTERNAL.finditer(line)]
    return out


def _scanned() -> list[Path]:
    files = [p for p in repo_files() if p.relative_to(REPO).as_posix().startswith(SCANNED)]
    return [p for p in files
            if not (p.relative_to(REPO).as_posix().startswith("docs/measurements/") and p.suffix in RECORD_SUFFIXES)]


@pytest.mark.parametrize(("text", "found"), [
    ("went on to its verdict (issue 26 item 8).", ["issue 26"]),
    ('"""Issue 24: one home per concept.', ["Issue 24"]),
    ("hub kernels off (issue #22 item 5)", ["issue #22"]),
    ("never a traceback (#16 item 10).", ["#16"]),
    ("the battery of issues 16, 26 and 38", ["issues 16"]),
    ("# 1. #21: `install --mode train`", ["#21"]),
    ("the fla#640 guard; mamba#977; VeOmni#1076 / VeOmni#845", []),
    ("huggingface/transformers#48692 and tile-ai/TileOPs#473", []),
    ("https://github.com/fla-org/flash-linear-attention/issues/640", []),
    ('INK = "#222222"; {lambda()#3}', []),
    ("produces incorrect results for gated chunk_bwd_dqkwg (see #640). Please upgrade", []),
])
def test_the_pattern_finds_tracker_numbers_and_passes_upstream_references(text: str, found: list[str]) -> None:
    assert internal_references(text) == found


def test_no_product_file_or_test_names_an_internal_issue_number() -> None:
    files = _scanned()
    assert REPO / "README.md" in files and REPO / "kernelcheck" / "__init__.py" in files
    assert Path(__file__) in files
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a binary file (an image, an archive)
        if path == Path(__file__):  # this module's own examples above
            text = text[:text.index("@pytest.mark.parametrize")]
        found += [f"{path.relative_to(REPO)}: {hit}" for hit in internal_references(text)]
    assert found == []
