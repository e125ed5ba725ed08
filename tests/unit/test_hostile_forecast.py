"""doctor --upgrade under hostile conditions: KERNELCHECK_OFFLINE keeps pip off the network, pip's
network waits are bounded as install's are, a direct requirement (local wheel, URL, VCS) is installed as given, a
SIGKILLed forecast's overlay is swept by the next one, and `-r DIR` says it is a folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core.errors import BadInput
from kernelcheck.forecast import overlay
from kernelcheck.forecast.resolve import Change, Index, changes_from_report, pip_args


def test_kernelcheck_offline_without_a_wheelhouse_refuses_the_forecast() -> None:
    with pytest.raises(BadInput) as exc:
        Index.of(None, False, no_network=True)
    assert "KERNELCHECK_OFFLINE" in exc.value.message  # wording: renderer test (names the variable)
    assert Index.of("/wh", False, no_network=True).args() == ["--find-links", "/wh", "--no-index"]


def test_kernelcheck_offline_stops_the_cli_forecast_before_any_pip(monkeypatch) -> None:
    monkeypatch.setenv("KERNELCHECK_OFFLINE", "1")
    res = CliRunner().invoke(main, ["doctor", "--model", "qwen3.8-27b", "--upgrade", "transformers==5.25.0"])
    assert res.exit_code == 2


def test_online_pip_calls_are_bounded_as_installs_are() -> None:
    from kernelcheck.core.lifeline import PIP_NET

    args = Index.of(None, False, no_network=False).args()
    assert args == PIP_NET and "--retries" in args and "--timeout" in args


def _item(name: str, version: str, **extra: object) -> dict:
    return {"metadata": {"name": name, "version": version}, **extra}


def test_a_direct_requirement_is_installed_as_given_not_refetched_by_name() -> None:
    report = {"install": [
        _item("mylib", "1.0", is_direct=True,
              download_info={"url": "file:///w/mylib-1.0-py3-none-any.whl", "archive_info": {}}),
        _item("fla-core", "0.6.1", is_direct=True,
              download_info={"url": "https://github.com/fla-org/flash-linear-attention",
                             "vcs_info": {"vcs": "git", "commit_id": "abc123"}}),
        _item("kernels", "0.19.1", is_direct=False,
              download_info={"url": "https://files.example/kernels-0.19.1.whl", "archive_info": {}}),
    ]}
    specs = {c.name: c.spec for c in changes_from_report(report, {})}
    assert specs == {"mylib": "mylib @ file:///w/mylib-1.0-py3-none-any.whl",
                     "fla-core": "fla-core @ git+https://github.com/fla-org/flash-linear-attention@abc123",
                     "kernels": "kernels==0.19.1"}


def test_upgrade_r_of_a_folder_says_it_is_a_folder(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as exc:
        pip_args(["-r", str(tmp_path)])
    assert "a folder" in exc.value.message  # wording: renderer test
    with pytest.raises(BadInput, match="no such requirements file"):
        pip_args(["-r", str(tmp_path / "absent.txt")])
    (tmp_path / "r.txt").write_text("kernels==0.19.1\n")
    assert pip_args([f"-r{tmp_path / 'r.txt'}"]) == ["-r", str(tmp_path / "r.txt")]


def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


def test_the_overlay_of_a_killed_forecast_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"{overlay.PREFIX}{_dead_pid()}-abc"
    live = tmp_path / f"{overlay.PREFIX}{os.getppid()}-def"
    mine = tmp_path / f"{overlay.PREFIX}{os.getpid()}-ghi"
    legacy = tmp_path / f"{overlay.PREFIX}xyz123"  # no pid in the name: not ours to judge
    report = tmp_path / f"{overlay.REPORT_PREFIX}{_dead_pid()}-jkl"  # pip's report folder of a killed resolve
    for d in (dead, live, mine, legacy, report):
        (d / "pkg").mkdir(parents=True)
    assert overlay.sweep(tmp_path) == [dead, report]
    assert not dead.exists() and not report.exists() and live.exists() and mine.exists() and legacy.exists()


def test_the_overlay_folder_names_its_process(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with overlay.overlay([], Index()) as folder:
        assert folder.name.startswith(f"{overlay.PREFIX}{os.getpid()}-")
    assert not folder.exists()


def test_change_spec_by_name_is_unchanged() -> None:
    assert Change("kernels", "0.17.2", "0.19.1").spec == "kernels==0.19.1"
