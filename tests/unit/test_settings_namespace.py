"""The KERNELCHECK_* namespace is kernelcheck's: every such name anywhere in the repository (code, docs, examples,
scripts, CI) is one core/settings.py knows, so a variable that looks like a setting but that kernelcheck never
reads (the Slurm prolog's earlier model variable) cannot come back. The example scripts' own are KCGATE_*."""

from __future__ import annotations

import re
from pathlib import Path

from kernelcheck.core import settings
from tests.sources import repo_files

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"(?<![_A-Z0-9])KERNELCHECK_[A-Z][A-Z0-9_]*[A-Z0-9]")
SKIP_DIRS = {".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"}
SKIP_UNDER = (ROOT / "tests" / "data", ROOT / "docs" / "gpu",  # recorded reports and traces
              ROOT / "CHANGELOG.md")  # history: it names what a variable was called before
TEXT = {".py", ".md", ".sh", ".sbatch", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ""}


def _files() -> list[Path]:
    out = []
    for p in repo_files():  # git's list: never a .venv of thousands of files inside the checkout
        rel = p.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts) or p.is_dir():
            continue
        if any(p.is_relative_to(d) for d in SKIP_UNDER) or p.suffix not in TEXT or p.stat().st_size > 2_000_000:
            continue
        out.append(p)
    return out


def test_every_kernelcheck_variable_in_the_repository_is_one_settings_py_knows() -> None:
    known = settings.__doc__ or ""
    found: dict[str, str] = {}
    for p in _files():
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for name in NAME.findall(text):
            found.setdefault(name, str(p.relative_to(ROOT)))
    assert "KERNELCHECK_OFFLINE" in found and "KERNELCHECK_PROGRESS" in found  # the scan sees the repository
    unknown = {n: where for n, where in found.items() if n not in known}
    assert unknown == {}, f"KERNELCHECK_* names core/settings.py does not know: {unknown}"


def test_the_slurm_gate_reads_its_own_kcgate_variables() -> None:
    prolog = (ROOT / "examples" / "slurm-prolog.sh").read_text(encoding="utf-8")
    assert "KCGATE_MODEL" in prolog and not NAME.search(prolog.replace("KERNELCHECK_*", ""))
