"""Bakes the commit into built wheels: `kernelcheck --version` in an installed wheel names the commit it was
built from (kernelcheck/_commit.txt, read by kernelcheck/core/version.py). Everything else is in pyproject.toml.

The commit is `git rev-parse HEAD` of the source tree (honours GIT_DIR), or $KERNELCHECK_BUILD_COMMIT where a
build has no git (a docker context without .git). Without either, nothing is written and --version says
"commit unknown". The file goes into the build folder only: the source tree is not changed.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _commit() -> str | None:
    given = os.environ.get("KERNELCHECK_BUILD_COMMIT", "").strip()
    if given:
        return given if re.fullmatch(r"[0-9a-f]{7,40}", given) else None
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = res.stdout.strip()
    return out if res.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", out) else None


class BuildPyWithCommit(build_py):
    def run(self) -> None:
        super().run()
        commit = _commit()
        if commit and not self.editable_mode:  # an editable checkout reads .git itself
            out = Path(self.build_lib) / "kernelcheck" / "_commit.txt"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(commit + "\n", encoding="utf-8")


setup(cmdclass={"build_py": BuildPyWithCommit})
