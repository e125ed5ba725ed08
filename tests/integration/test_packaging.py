"""Installing kernelcheck never changes the stack it checks.

The wheel is built from this checkout the way a user builds it (`pip wheel`, build isolation, setuptools from the
index), and `pip install --dry-run --report` of it runs in real venvs (tests/envs.py `stack_venv`) that hold each
supported transformers with a kernels release inside its window, torch 2.13.0 CPU under both: pip must want to
install kernelcheck and change nothing that is installed (torch, triton, transformers, kernels, huggingface_hub
included), with and without the `hub` extra.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import envs

pytestmark = pytest.mark.integration

DIST = "kernelcheck-transformers"  # `kernelcheck` on the index is an unrelated project (1.1.4)
STACK = {"torch", "triton", "transformers", "kernels", "huggingface-hub"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built from a copy of what the sdist holds (the checkout stays clean)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(envs.REPO / name, src / name)
    for name in ("kernelcheck", "matrix"):
        shutil.copytree(envs.REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc",
                                                                                   "_commit.txt"))
    out = tmp_path_factory.mktemp("dist")
    # the copy has no .git: GIT_DIR points git (in setup.py) at this checkout's, as building in the checkout would
    env = dict(os.environ, GIT_DIR=_git(["rev-parse", "--absolute-git-dir"]))
    env.pop("KERNELCHECK_BUILD_COMMIT", None)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                          "-w", str(out), str(src)], capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    (whl,) = out.glob("*.whl")
    return whl


def _git(args: list[str]) -> str:
    return subprocess.run(["git", *args], cwd=envs.REPO, capture_output=True, text=True, check=True).stdout.strip()


def test_the_wheel_bakes_the_commit_and_version_names_it(wheel, tmp_path):
    head = _git(["rev-parse", "HEAD"])
    with zipfile.ZipFile(wheel) as z:
        assert z.read("kernelcheck/_commit.txt").decode().strip() == head
        z.extractall(tmp_path / "site")
    # run from the installed files (no checkout around them): the commit comes from the baked file
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "--version"], capture_output=True, text=True,
                         cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")), timeout=120)
    assert res.returncode == 0 \
        and f"commit {head[:12]} (build)" in res.stdout, res.stdout + res.stderr  # wording: renderer test
    assert not (envs.REPO / "kernelcheck" / "_commit.txt").exists()  # the build wrote into its own folder


def _metadata(whl: Path) -> tuple[dict[str, list[str]], str, list[str]]:
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(z.read(f"{info}/METADATA").decode())
        entry = z.read(f"{info}/entry_points.txt").decode()
    return {k: msg.get_all(k) or [] for k in ("Name", "Requires-Dist", "Provides-Extra")}, entry, names


def test_the_wheel_carries_the_distribution_name_the_command_and_no_bound_on_the_stack(wheel):
    meta, entry, names = _metadata(wheel)
    assert meta["Name"] == [DIST] and wheel.name.startswith("kernelcheck_transformers-")
    assert "kernelcheck = kernelcheck.cli.main:run" in entry  # the command is unchanged
    assert "kernelcheck/__init__.py" in names and "kernelcheck/_matrix/models.toml" in names  # so is the import
    reqs = [Requirement(r) for r in meta["Requires-Dist"]]
    for r in reqs:
        name = canonicalize_name(r.name)
        if name in STACK:
            assert not r.specifier, f"{r}: a bound on the stack kernelcheck checks makes pip change it"
        if name == "kernels":  # optional: it changes what transformers loads, so it is never added silently
            assert r.marker is not None and r.marker.evaluate({"extra": "hub"}), r
            assert not r.marker.evaluate({"extra": ""}), r
    assert "hub" in meta["Provides-Extra"]


def _installed(python: Path) -> dict[str, str]:
    res = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True)
    return {canonicalize_name(d["name"]): d["version"] for d in json.loads(res.stdout)}


def _would_install(python: Path, *requirements: str, tmp: Path) -> dict[str, str]:
    report = tmp / "report.json"
    res = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run",
                          "--report", str(report), *requirements], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    items = json.loads(report.read_text())["install"]
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in items}


def _changed(installed: dict[str, str], would: dict[str, str]) -> dict[str, str]:
    """What pip would replace: every distribution it installs that the venv already holds (at another version)."""
    return {n: f"{installed[n]} -> {v}" for n, v in would.items() if n in installed}


@pytest.mark.parametrize("transformers,kernels", envs.STACKS, ids=[f"tf{t}-kernels{k}" for t, k in envs.STACKS])
@pytest.mark.parametrize("extra", ["", "[hub]"])
def test_installing_the_wheel_changes_nothing_in_the_stack(wheel, transformers, kernels, extra, tmp_path):
    python = envs.stack_venv(transformers, kernels)
    installed = _installed(python)
    assert installed["transformers"] == transformers and installed["kernels"] == kernels  # the stack under test
    assert installed["torch"].startswith("2.13.0")
    would = _would_install(python, f"{DIST}{extra} @ {wheel.as_uri()}", tmp=tmp_path)
    assert would.get(DIST) == "0.1.0", would  # pip really resolved kernelcheck here
    assert _changed(installed, would) == {}, would
    assert not STACK & set(would), would


def test_the_check_sees_a_change_the_old_kernels_pin_made(tmp_path):
    """The assertion above can fail: kernelcheck 0.1's `kernels>=0.17.2,<0.18` in the 5.24 stack (kernels 0.18.3)
    is a downgrade of kernels: installing kernelcheck 0.1 changed the stack it checked."""
    python = envs.stack_venv("5.24.0", "0.18.3")
    changed = _changed(_installed(python), _would_install(python, "kernels>=0.17.2,<0.18", tmp=tmp_path))
    assert changed == {"kernels": "0.18.3 -> 0.17.2"}
