"""After an install interrupted while pip ran (SIGKILL: nothing ran a handler), doctor says so and that the next
`kernelcheck install` puts the environment back (install/txn.py repairs from the journal first); an install still
running (its pid alive) is not called interrupted."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core import install_journal


def _dead_pid() -> int:
    pid = 4_000_000
    while Path(f"/proc/{pid}").exists():
        pid += 1
    return pid


def _journal(site: Path, pid: int) -> None:
    (site / install_journal.TXN).mkdir(parents=True)
    (site / install_journal.TXN / "journal.json").write_text(json.dumps({"pid": pid, "dists": ["fla-core", "einops"]}))


def test_doctor_names_an_interrupted_install_and_the_repair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.core import matrix
    from kernelcheck.doctor import run

    _journal(tmp_path, _dead_pid())
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [f for f in run.environment_findings(_env(), matrix.load()) if f.id == "install-interrupted"]
    assert len(found) == 1 and str(tmp_path) in found[0].message and "fla-core" in found[0].message
    assert "kernelcheck install" in (found[0].fix or "")  # wording: the finding's own fix, tested once here


def _env() -> Any:
    """The environment the finding is read beside: no torch, no kernel package (nothing else is read)."""
    from types import SimpleNamespace

    return SimpleNamespace(torch=None, packages={})


def test_a_running_install_is_not_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _journal(tmp_path, os.getpid())
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [s for s, _ in install_journal.interrupted()] == []


def test_a_damaged_journal_is_skipped_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / install_journal.TXN).mkdir()
    (tmp_path / install_journal.TXN / "journal.json").write_bytes(b"\xff[[[")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert install_journal.interrupted() == []
