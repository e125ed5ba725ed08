"""Parsed sources, once per test run: many fast-lane tests walk every module of the package (one home per
concept, import layers, who decides); parsing 150 files again for each of them cost seconds of CPU."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def tree(path: Path) -> ast.Module:
    """The module at `path`, parsed; the same tree while the file is unchanged (read-only: do not edit it)."""
    st = path.stat()
    return _parsed(str(path), st.st_mtime_ns, st.st_size)


@functools.cache
def _parsed(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def _listed(root: Path) -> tuple[str, ...]:
    """The repository's files as git lists them (tracked, and new ones not ignored), relative paths; without git
    (an unpacked sdist), a walk that skips hidden and build folders (.venv, .git, caches)."""
    import os
    import subprocess

    try:
        res = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, timeout=30)
        if res.returncode == 0 and res.stdout:
            return tuple(sorted({p for p in res.stdout.decode("utf-8", "replace").split("\0")
                                 if p and (root / p).is_file()}))
    except (OSError, subprocess.SubprocessError):
        pass
    out = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__" and not d.endswith(".egg-info")]
        out += [os.path.relpath(os.path.join(here, f), root) for f in files]
    return tuple(sorted(out))


REPO = Path(__file__).resolve().parents[1]
# listed once, when the test modules are collected (the fast lane refuses a process inside a test: tests/lanes.py)
_REPO_FILES = _listed(REPO)


def repo_files(under: str = "") -> list[Path]:
    """The repository's own files (never a .venv, .git or cache folder inside the checkout), `under` a folder."""
    prefix = under.rstrip("/") + "/" if under else ""
    return [REPO / p for p in _REPO_FILES if p.startswith(prefix)]
