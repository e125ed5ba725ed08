"""install --target DIR: the command sees what DIR already holds while it runs, and leaves sys.path as it was
(install/command.py `_target_on_path`), so a library caller's interpreter is not changed behind its back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.install import command


def test_the_target_is_first_on_sys_path_only_while_the_command_runs(tmp_path: Path) -> None:
    before = list(sys.path)
    with command._target_on_path(str(tmp_path)):
        assert sys.path[0] == str(tmp_path.resolve()) and sys.path[1:] == before
    assert sys.path == before


def test_a_target_already_on_sys_path_is_neither_added_nor_removed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    before = list(sys.path)
    with command._target_on_path(str(tmp_path)):
        assert sys.path == before
    assert sys.path == before


def test_the_install_command_restores_sys_path_when_it_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def fails(req: command.Request, echo: object, as_json: bool, done: list[object], m: object) -> None:
        seen.append(sys.path[0])
        raise BadInput("refused")

    monkeypatch.setattr(command, "_run", fails)
    before = list(sys.path)
    with pytest.raises(BadInput, match="refused"):
        command.run(command.Request(model="qwen3.8-27b", target=str(tmp_path / "site")), print, False, m=matrix.load())
    assert seen == [str((tmp_path / "site").resolve())] and sys.path == before
