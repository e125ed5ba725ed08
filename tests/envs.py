"""Real test environments without mocks: extra site dirs made with `pip install --target`.

A test that needs transformers 5.15.1, or fla-core without triton, gets a folder holding exactly
those distributions and runs kernelcheck in a subprocess with that folder first on PYTHONPATH.
The base venv (torch CPU build, the project's deps) stays untouched. Folders are cached under
KERNELCHECK_TEST_CACHE (default ~/.cache/kernelcheck-tests) so a second run reuses them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("KERNELCHECK_TEST_CACHE", Path.home() / ".cache" / "kernelcheck-tests"))


@contextlib.contextmanager
def cache_lock(name: str):
    """Hold an exclusive lock on one cache entry: two test runs at once build it once, never half each."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fail(message: str) -> None:
    """Stop: the test fails (pytest.fail) under pytest; elsewhere (`python -m tests.groundtruth` in a venv without
    pytest) a RuntimeError with the same message."""
    if "pytest" in sys.modules:
        import pytest

        pytest.fail(message)
    raise RuntimeError(message)


def progress(message: str) -> None:
    """A line on the terminal (not captured by pytest) while the test cache fills: it can take minutes."""
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(f"[kernelcheck-tests] {message}\n")
    except OSError:
        sys.stderr.write(f"[kernelcheck-tests] {message}\n")


def site(*requirements: str, deps: bool = False) -> Path:
    """A folder with `requirements` pip-installed into it (--target), built once and cached."""
    key = hashlib.sha256(json.dumps([requirements, deps, sys.version]).encode()).hexdigest()[:16]
    target = CACHE / f"site-{key}"
    done = target / ".complete"
    if done.exists():
        return target
    with cache_lock(f"site-{key}"):
        if done.exists():
            return target
        return _build_site(target, done, requirements, deps)


def _build_site(target: Path, done: Path, requirements: tuple[str, ...], deps: bool) -> Path:
    progress(f"building test site {' '.join(requirements)} in {target} (once; cached for later runs)")
    shutil.rmtree(target, ignore_errors=True)  # a half-built folder from an interrupted run
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
           "--target", str(target), "--upgrade", *requirements]
    if not deps:
        cmd.insert(4, "--no-deps")
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"could not build test site {requirements}: {res.stderr[-2000:]}")
    done.write_text(" ".join(requirements))
    return target


# The newest consistent stacks kernelcheck supports: each transformers with a kernels release inside its window
# (matrix/transformers.toml: 5.13 >=0.15.2,<0.16; 5.24 >=0.18.2,<0.19; 5.25 >=0.19.1,<0.20, required there).
STACKS = (("5.13.1", "0.15.2"), ("5.24.0", "0.18.3"), ("5.25.0", "0.19.1"))
TF525 = ("transformers==5.25.0", "kernels==0.19.1")  # a site (deps=True) with 5.25 and the kernels it requires


def stack_venv(transformers: str, kernels: str | None) -> Path:
    """A real venv holding torch 2.13.0 (this machine's CPU build), transformers and kernels, installed the normal
    way (with their dependencies), built once and cached; returns its python. For what pip does in a user's venv."""
    reqs = ["torch==2.13.0", f"transformers=={transformers}"] + ([f"kernels=={kernels}"] if kernels else [])
    key = hashlib.sha256(json.dumps([reqs, sys.version]).encode()).hexdigest()[:16]
    root = CACHE / f"venv-{key}"
    python, done = root / "bin" / "python", root / ".complete"
    if done.exists():
        return python
    with cache_lock(f"venv-{key}"):
        if not done.exists():
            progress(f"building test venv {' '.join(reqs)} in {root} (once; cached for later runs)")
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True)
            res = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                  "--no-compile", *reqs], capture_output=True, text=True)
            if res.returncode != 0:
                fail(f"could not build test venv {reqs}: {res.stderr[-2000:]}")
            done.write_text(" ".join(reqs))
    return python


def run(args: list[str], *sites: Path, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python -m kernelcheck ARGS` with `sites` first on sys.path, like a user's environment."""
    e = dict(os.environ)
    e.pop("KERNELCHECK_DEBUG", None)
    paths = [str(s) for s in sites] + [str(REPO)]
    if e.get("PYTHONPATH"):
        paths.append(e["PYTHONPATH"])
    e["PYTHONPATH"] = os.pathsep.join(paths)
    e.setdefault("HF_HUB_OFFLINE", "1")
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "kernelcheck", *args], capture_output=True, text=True,
                          env=e, cwd=str(cwd or REPO), timeout=timeout)


def run_json(args: list[str], *sites: Path, **kw) -> tuple[int, dict]:
    res = run([*args, "--json"], *sites, **kw)
    try:
        data = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not JSON (exit {res.returncode}):\nstdout={res.stdout[-3000:]}\n"
                             f"stderr={res.stderr[-3000:]}") from None
    return res.returncode, data


def function(report: dict, name: str) -> dict:
    for f in report["functions"]:
        if f["name"] == name:
            return f
    raise AssertionError(f"{name} not in report functions: {[f['name'] for f in report['functions']]}")


# TRL's SFT module (trl.trainer.sft_trainer, home of the padding-free DataCollatorForLanguageModeling) imports
# accelerate and datasets at the top; with --no-deps these are all its import needs beside the venv (torch,
# transformers, numpy, huggingface_hub, pyyaml, fsspec, ...). One site for them, one small site per trl release.
TRL_DEPS = ("accelerate==1.16.0", "datasets==5.2.0", "pyarrow==26.0.1", "pandas==3.1.1", "python-dateutil==4.0.0",
            "multiprocess==0.70.19", "dill==0.4.1", "xxhash==4.1.0", "psutil==7.2.2")


def trl_sites(version: str) -> tuple[Path, Path]:
    """(trl==version, its import's dependencies): put both first on PYTHONPATH, in this order."""
    return site(f"trl=={version}"), site(*TRL_DEPS)
