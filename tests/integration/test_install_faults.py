"""Faults at install time: bad paths are exit 2 before anything changes, and an install interrupted
after pip started is undone from its journal by the next run (the SIGKILL case: nothing ran a handler)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck.install import apply
from kernelcheck.install import txn as txn_mod
from tests.envs import REPO
from tests.kcfixtures import kc, pypi_wheels

MODEL = "qwen3.8-27b"
pytestmark = pytest.mark.integration  # every test here runs kernelcheck or pip in a process


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


def _read_only_run(ro: Path, args: list[str]) -> subprocess.CompletedProcess:
    """`kc(args)` with `ro` read-only for kernelcheck: a 0555 folder for a normal user; as root (which writes
    through 0555) a read-only tmpfs mounted on `ro` in a private mount namespace (`unshare -m`), as a
    read-only bind mount in a container is."""
    if os.geteuid() != 0:
        ro.chmod(0o555)
        try:
            return kc(Path(sys.executable), args)
        finally:
            ro.chmod(0o755)
    if shutil.which("unshare") is None:
        pytest.skip("root without unshare: no read-only folder to test with")
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("KERNELCHECK_DEBUG", None)
    script = f'mount -t tmpfs -o ro none "{ro}" || exit 99; exec "$0" -m kernelcheck "$@"'
    res = subprocess.run(["unshare", "-m", "sh", "-c", script, sys.executable, *args], capture_output=True,
                         text=True, env=env, cwd=str(REPO), timeout=300)
    if res.returncode == 99:
        pytest.skip(f"cannot mount a read-only tmpfs here: {res.stderr[-300:]}")
    return res


@pytest.mark.parametrize("where", ["inside", "itself"], ids=["target-under-a-read-only-folder",
                                                               "target-is-read-only"])
def test_read_only_target_is_exit_2_before_anything_runs(tmp_path: Path, where: str):
    ro = tmp_path / "ro"
    ro.mkdir()
    target = ro / "site" if where == "inside" else ro
    res = _read_only_run(ro, ["install", "--model", MODEL, "--offline", "--target", str(target)])
    said = res.stdout + res.stderr
    assert res.returncode == 2, said[-3000:]  # was exit 4 with pip's traceback
    assert f"--target {target} is not writable" in res.stderr \
        and "Traceback" not in said, said[-3000:]  # wording: renderer test (exit-2 message)
    assert "plan" not in res.stdout  # wording: renderer test; refused before anything was planned or run


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
    txn = txn_mod.begin(site, ["fla-core", "einops"], files)
    backup = txn_mod.Backup(txn / "backup")
    for d in ("fla-core", "einops"):
        backup.save(site, d)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(site),
                    *files], check=True)
    assert (site / "fla").is_dir() and (txn / "journal.json").exists()  # a half-done install, SIGKILLed
    said: list[str] = []
    txn_mod.repair(str(site), said.append)
    assert _state(site) == before and not (site / "fla").exists() and not txn.exists()
    assert "repaired an interrupted kernelcheck install" in said[0]  # wording: renderer test
    txn_mod.repair(str(site), said.append)  # nothing left to repair: silent
    assert len(said) == 1


def _venv_without_pip(where: Path) -> Path:
    """A venv as `uv venv` + `uv pip install kernelcheck` leaves it: every package of this test venv (torch,
    transformers, click ...) but no pip. `python -m venv --without-pip`, then each top-level entry of this
    venv's site-packages except pip linked into the new one."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    py = where / "bin" / "python"
    new_site = Path(subprocess.run([str(py), "-c", "import sysconfig;print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name == "pip" or entry.name.startswith("pip-") or (new_site / entry.name).exists():
            continue
        if entry.suffix == ".pth":
            (new_site / entry.name).write_text(entry.read_text())
        else:
            (new_site / entry.name).symlink_to(entry)
    return py


@pytest.mark.parametrize("dry_run", [["--dry-run"], []], ids=["dry-run", "install"])
def test_a_venv_without_pip_is_refused_at_plan_time_with_the_reason(tmp_path: Path, dry_run: list[str]):
    py = _venv_without_pip(tmp_path / "nopip")
    probe = subprocess.run([str(py), "-c", "import torch, transformers, click; import pip"], capture_output=True,
                           text=True)
    # a real pip-less venv, all else there
    assert "No module named 'pip'" in probe.stderr, probe.stderr[-2000:]  # wording: Python's own message
    res = kc(py, ["install", "--model", MODEL, "--offline", *dry_run])
    said = res.stdout + res.stderr
    assert res.returncode == 2 and "has no pip module" in res.stderr \
        and "Traceback" not in said, said[-2000:]  # wording: renderer test (exit-2 message)
    assert "python -m ensurepip" in res.stderr \
        and "Nothing was planned or changed" in res.stderr  # wording: renderer test (exit-2 message)
    assert "rolled its own changes back" not in said  # wording: renderer test; the old claim, although pip never ran


def test_install_one_package_for_an_arch_exits_as_the_doctor_it_prints(tmp_path: Path):
    """Case 2: `install --package fla-core --arch 9.0` printed READY (exit 0) under its own post-install doctor
    block saying FALLBACK (exit 3), and its JSON had "functions": []. Real PyPI wheels, real pip, --target."""
    from tests.kcfixtures import cuda_torch_venv

    wh = tmp_path / "wh"
    wh.mkdir()
    for pat in ("fla_core-*.whl", "einops-*.whl"):
        for w in pypi_wheels().glob(pat):
            shutil.copy(w, wh)
    py = cuda_torch_venv() / "bin" / "python"
    args = ["install", "--model", MODEL, "--package", "fla-core", "--arch", "9.0", "--offline", "--wheelhouse",
            str(wh), "--target", str(tmp_path / "site")]
    res = kc(py, [*args, "--json"])
    data = json.loads(res.stdout)
    after = data["doctor_after"]
    assert res.returncode == after["exit_code"] == data["exit_code"] == 3, res.stderr[-3000:]
    assert data["verdict"] == after["verdict"] == "fallback"
    assert data["functions"] and data["functions"] == after["functions"]
    status = {f["name"]: f["status"] for f in data["functions"]}
    assert status["chunk_gated_delta_rule"] == "fast" and status["causal_conv1d_fn"] == "fallback"
    text = kc(py, args)  # installed already: the plan keeps it, and the doctor block decides again
    verdicts = [ln.strip() for ln in text.stdout.splitlines() if ln.strip().startswith("verdict")]
    assert text.returncode == 3 and verdicts, text.stdout[-3000:]
    assert all("FALLBACK" in v and "(exit 3)" in v for v in verdicts), verdicts  # never READY under FALLBACK


def test_the_second_of_two_installs_at_once_keeps_what_the_first_installed(tmp_path: Path):
    """Case 8: the second install waited for the lock, then reinstalled what the first had just installed.
    Two real installs of the same packages into one --target, both started while the test holds the install
    locks (as a third install would): once released, one installs, the other waits, re-plans and keeps."""
    import time

    from tests.kcfixtures import cuda_torch_venv

    wh = tmp_path / "wh"
    wh.mkdir()
    for pat in ("fla_core-*.whl", "einops-*.whl"):
        for w in pypi_wheels().glob(pat):
            shutil.copy(w, wh)
    py, site = cuda_torch_venv() / "bin" / "python", tmp_path / "site"
    args = [str(py), "-m", "kernelcheck", "install", "--model", MODEL, "--package", "fla-core", "--arch", "9.0",
            "--offline", "--wheelhouse", str(wh), "--target", str(site), "--json"]
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1")
    procs, errs, outs = [], [tmp_path / "a.err", tmp_path / "b.err"], [tmp_path / "a.out", tmp_path / "b.out"]
    with apply.locked(apply.lock_paths(wh, str(site)), progress=lambda s: None):
        for out, err in zip(outs, errs, strict=True):
            with open(out, "w") as fo, open(err, "w") as fe:
                procs.append(subprocess.Popen(args, stdout=fo, stderr=fe, env=env))
        deadline = time.monotonic() + 240
        while not all("waiting for another kernelcheck install" in e.read_text() for e in errs):
            assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, \
                [e.read_text()[-2000:] for e in errs]
            time.sleep(0.1)
    codes = [p.wait(timeout=300) for p in procs]
    reports = [json.loads(o.read_text()) for o in outs]
    said = [e.read_text() for e in errs]
    assert codes == [3, 3], said
    installed = [{e["distribution"] for e in r["installed"]} for r in reports]
    assert sorted(installed, key=len) == [set(), {"fla-core", "einops"}], installed  # installed once
    second = reports[installed.index(set())]
    assert {s["package"]: s["action"] for s in second["plan"]}["fla-core"] == "keep", second["plan"]
    # re-planned after the lock: its pip never ran (no "$ pip ..." line)
    assert "$ " not in said[installed.index(set())]  # wording: renderer test
    # nothing to change: no second doctor process, the doctor before the plan is the verdict (said once)
    assert second["exit_code"] == 3 and "doctor_after" not in second
    assert "install-nothing-to-change" in {f["id"] for f in second["findings"]}


def test_a_signal_during_a_failing_import_is_not_lost() -> None:
    """A real SIGTERM that lands while a held block fails (a broken package's import raises ImportError) is
    raised as the interruption, not dropped with the block's error (case 5: the install went on)."""
    import signal

    from kernelcheck.core import signals
    from kernelcheck.core.errors import Interrupted

    with signals.routed(), pytest.raises(Interrupted) as got, signals.held(second_interrupts=True):
        os.kill(os.getpid(), signal.SIGTERM)
        raise ImportError("No module named 'einops'")
    assert got.value.exit_code == 143
