"""Faults at install time: bad paths are exit 2 before anything changes, and an install interrupted
after pip started is undone from its journal by the next run (the SIGKILL case: nothing ran a handler)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kcfixtures import kc, pypi_wheels

from kernelcheck.install import apply

MODEL = "qwen3.8-27b"


@pytest.mark.parametrize("flag, value, words", [
    ("--wheelhouse", "/tmp/kc-no-such-wheelhouse-typo", "does not exist"),
    ("--wheelhouse", "/proc/wh", "does not exist"),
    ("--wheelhouse", "/proc/self", "not a readable folder"),
    ("--wheelhouse", "/etc/hostname", "is a file"),
])
def test_bad_wheelhouse_is_exit_2_and_never_created_even_by_a_dry_run(flag, value, words):
    res = kc(Path(sys.executable), ["install", "--model", MODEL, "--dry-run", "--offline", flag, value])
    assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not Path("/tmp/kc-no-such-wheelhouse-typo").exists()


def test_read_only_target_is_exit_2_before_anything_runs(tmp_path: Path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        res = kc(Path(sys.executable), ["install", "--model", MODEL, "--offline", "--target", str(ro / "site")])
    finally:
        ro.chmod(0o755)
    if res.returncode != 2 and "root" in subprocess.run(["id", "-un"], capture_output=True, text=True).stdout:
        pytest.skip("running as root: a 0555 folder is still writable")
    assert res.returncode == 2 and "not writable" in res.stderr and "Traceback" not in res.stderr


def _state(site: Path) -> dict[str, int]:
    return {str(p.relative_to(site)): p.stat().st_size for p in sorted(site.rglob("*")) if p.is_file()}


def test_an_install_killed_after_pip_is_repaired_by_the_next_run(tmp_path: Path):
    wh = pypi_wheels()
    site = tmp_path / "site"
    old = sorted(wh.glob("einops-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), *map(str, old)],
                   check=True)
    before = _state(site)
    files = [str(p) for p in sorted(wh.glob("fla_core-*.whl"))] + [str(p) for p in old]
    # what execute() does before pip: the journal and the backup; then pip runs and the process dies
    txn = apply._begin(site, ["fla-core", "einops"], files)
    backup = apply.Backup(txn / "backup")
    for d in ("fla-core", "einops"):
        backup.save(site, d)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(site),
                    *files], check=True)
    assert (site / "fla").is_dir() and (txn / "journal.json").exists()  # a half-done install, SIGKILLed
    said: list[str] = []
    apply.repair(str(site), said.append)
    assert _state(site) == before and not (site / "fla").exists() and not txn.exists()
    assert "repaired an interrupted kernelcheck install" in said[0]
    apply.repair(str(site), said.append)  # nothing left to repair: silent
    assert len(said) == 1


def test_a_venv_without_pip_is_refused_at_plan_time_with_the_reason(tmp_path: Path):
    venv = tmp_path / "nopip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    probe = subprocess.run([str(py), "-c", "import pip"], capture_output=True, text=True)
    if probe.returncode == 0:
        pytest.skip("pip is importable through the system site-packages here")
    res = kc(py, ["install", "--model", MODEL, "--dry-run", "--offline"])
    assert res.returncode == 2 and "has no pip module" in res.stderr and "Traceback" not in res.stderr, res.stderr
