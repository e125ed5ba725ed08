"""What `kernelcheck --version` says: the version, the git commit and the date of the matrix/ data; and the
package's own metadata, at one address inside the package (`__version__`, `SCHEMA`, `PACKAGE`): kernelcheck/__init__.py
re-exports the first two for users, and no module of the package imports the package root.

The commit comes from the checkout kernelcheck runs from (read from .git's files: no git process, works in git
worktrees), else from `kernelcheck/_commit.txt`, which every wheel build bakes in (setup.py: `git rev-parse HEAD`
of the source tree, or the commit a build without .git passes in), else it is unknown. The data date is
matrix/data.toml's `updated`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__version__ = "0.1.0"  # pyproject.toml's [project] version
SCHEMA = "kernelcheck.report/1"  # 0.1's one id; each report kind has its own now: kernelcheck/schemas
PACKAGE = Path(__file__).resolve().parents[1]  # the kernelcheck package's folder
_PKG = PACKAGE


@dataclass(frozen=True)
class VersionInfo:
    version: str
    commit: str | None  # 12 hex digits
    commit_from: str  # "checkout" | "build" | ""
    data_updated: str | None  # YYYY-MM-DD

    def line(self) -> str:
        commit = f"commit {self.commit} ({self.commit_from})" if self.commit else "commit unknown"
        return f"kernelcheck {self.version}, {commit}, matrix data of {self.data_updated or 'unknown date'}"


def _gitdir(root: Path) -> Path | None:
    dotgit = root / ".git"
    if dotgit.is_dir():
        return dotgit
    if dotgit.is_file():  # a worktree or submodule: "gitdir: PATH"
        text = dotgit.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir:"):
            path = Path(text.split(":", 1)[1].strip())
            return path if path.is_absolute() else (root / path).resolve()
    return None


def git_commit(root: Path) -> str | None:
    """The commit HEAD names in the checkout at `root`, read from its files; None where there is none."""
    try:
        gitdir = _gitdir(root)
        if gitdir is None:
            return None
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head[:12] or None
        ref = head[4:].strip()
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
        for base in (gitdir, common):
            if (base / ref).is_file():
                return (base / ref).read_text(encoding="utf-8").strip()[:12] or None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name.strip() == ref:
                    return sha[:12]
    except OSError:
        return None
    return None


def data_updated() -> str | None:
    """matrix/data.toml's date; None when it cannot be read (a broken KERNELCHECK_MATRIX_DIR: `--version` still
    says the version, and the command that reads the folder says what is wrong with it, exit 2)."""
    from kernelcheck.core import entry
    from kernelcheck.core.errors import KernelcheckError

    try:
        return entry.data_date()
    except (OSError, ValueError, RecursionError, KernelcheckError):
        return None


def info() -> VersionInfo:
    root = _PKG.parent
    commit = git_commit(root) if (root / "pyproject.toml").is_file() else None
    if commit:
        return VersionInfo(__version__, commit, "checkout", data_updated())
    baked = _PKG / "_commit.txt"
    if baked.is_file():
        text = baked.read_text(encoding="utf-8").strip()[:12]
        if text:
            return VersionInfo(__version__, text, "build", data_updated())
    return VersionInfo(__version__, None, "", data_updated())
