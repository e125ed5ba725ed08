"""matrix/data.toml's `updated` (what `kernelcheck --version` shows as the data date) is not older than git's last
change to matrix/: a change to the data without bumping it fails here. Runs git: integration lane."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelcheck.core import version

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_matrix_data_date_is_not_older_than_the_last_commit_to_matrix():
    if shutil.which("git") is None or version.git_commit(ROOT) is None:
        pytest.skip("not a git checkout")
    last = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%cs", "--", "matrix/"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert last and (version.data_updated() or "") >= last, f"bump matrix/data.toml updated to {last} or later"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert version.git_commit(ROOT) == head[:12]  # the file reading agrees with git
