"""Fault injection: SIGINT and SIGTERM sent to a real `python -m kernelcheck install` at many points.

Real installs of the real PyPI fla-core 0.6.0 and einops 0.8.2 wheels (tests/kcfixtures.pypi_wheels) into a
--target folder or a scratch venv, and a real build of the real causal-conv1d 1.7.0 sdist with nvcc. The
signal is timed by install's own progress lines on stderr (`--json` puts them there), by fixed delays, and
for the build by the first compiler process. After each run:

- the environment is exactly what it was before (the folder's files and sizes, `pip freeze`), or exactly
  what a completed install leaves (an uninterrupted run of the same install);
- the exit code is the documented one for an interruption: 130 after SIGINT, 143 after SIGTERM (128 + the
  signal, as shells report it), with a one-paragraph message on stderr and no traceback;
- no process of that install is left: every process the install started carries a marker in its
  environment, and none (pip, the doctor after install, ninja, nvcc, cicc, cc1plus ...) is alive when
  kernelcheck has exited.

"Ctrl-C" sends SIGINT to kernelcheck's whole process group, as a terminal does; "kill" sends SIGTERM to the
kernelcheck process only, as `kill PID` and `docker stop` do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.envs import REPO
from tests.kcfixtures import cuda_torch_venv, have_nvcc, pypi_wheels, scratch_venv, site_packages

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH")]
MODEL = "qwen3.8-27b"
MARK = "KCTEST_FAULT_MARK"  # set only for the install under test; inherited by everything it starts
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
LOCK = ".kernelcheck-install.lock"
MANIFEST_NAMES = (".kernelcheck-manifest.json", "manifest.json")


# ---------------------------------------------------------------- processes

def _alive_with(token: str) -> list[str]:
    """Processes (not zombies) whose environment carries `token`: what is left of one install."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1: stat.rindex(")")], stat[stat.rindex(")") + 2:]
        if rest.split()[0] not in ("Z", "X") and f"{MARK}={token}".encode() in environ.split(b"\0"):
            found.append(f"{pid} {comm} (state {rest.split()[0]}, pgrp {rest.split()[2]})")
    return found


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    left: list[str]  # processes of the install still alive after kernelcheck exited
    sent_after: float


def _env(token: str, tmp: Path | None = None) -> dict[str, str]:
    e = dict(os.environ)
    e.pop("KERNELCHECK_DEBUG", None)
    e.update({"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1",
              "PYTHONUNBUFFERED": "1", MARK: token})
    if tmp is not None:
        e["TMPDIR"] = str(tmp)
    return e


def _interrupt(python: Path, args: list[str], sig: signal.Signals, how: str, trigger, work: Path,
               tmp: Path | None = None, timeout: float = 120) -> Run:
    """Start the install, wait until `trigger(stderr_so_far, elapsed, token)` is true, send `sig` (to the
    process group for "ctrl-c", to the process for "kill"), wait for the exit, list what is left."""
    token = uuid.uuid4().hex
    out, err = work / f"{token}.out", work / f"{token}.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen([str(python), "-m", "kernelcheck", *args], stdout=fo, stderr=fe,
                                env=_env(token, tmp), cwd=str(REPO), start_new_session=True)
    started = time.monotonic()
    try:
        while not trigger(err.read_text(errors="replace"), time.monotonic() - started, token):
            if proc.poll() is not None:
                raise AssertionError(f"the install ended (exit {proc.returncode}) before the signal point:\n"
                                     f"{err.read_text()[-3000:]}")
            if time.monotonic() - started > timeout:
                raise AssertionError(f"the signal point never came:\n{err.read_text()[-3000:]}")
            time.sleep(0.02)
        sent = time.monotonic() - started
        if how == "ctrl-c":
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        code, left = _ended(proc, token)
    finally:
        _reap(proc)
    return Run(code, out.read_text(errors="replace"), err.read_text(errors="replace"), left, sent)


def _ended(proc: subprocess.Popen, token: str) -> tuple[int, list[str]]:
    """The interrupted kernelcheck's exit code and what is still running of it."""
    code = proc.wait(timeout=60)
    return code, _alive_with(token)


def _reap(proc: subprocess.Popen) -> None:
    """A kernelcheck still running when the test gives up is killed (a failing test leaves no process)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def after_line(text: str, delay: float = 0.0):
    """Trigger: `delay` seconds after the first stderr line containing `text` appeared."""
    seen: list[float] = []

    def trigger(stderr: str, elapsed: float, token: str) -> bool:
        if not seen and text in stderr:
            seen.append(elapsed)
        return bool(seen) and elapsed - seen[0] >= delay

    trigger.__name__ = f"{text.strip()!r}+{delay}s"
    return trigger


def after(seconds: float):
    def trigger(stderr: str, elapsed: float, token: str) -> bool:
        return elapsed >= seconds

    return trigger


def _assert_interrupted(run: Run, sig: signal.Signals) -> None:
    said = run.stdout + run.stderr
    assert run.code == EXIT[sig], f"exit {run.code} after {sig.name}, want {EXIT[sig]}:\n{said[-3000:]}"
    assert "Traceback" not in said and "Aborted!" not in said, said[-3000:]
    # the exit code says which signal (128 + its number); "interrupted by SIG..." is worded in test_signals.py
    assert run.left == [], f"left running after kernelcheck exited: {run.left}"


# ---------------------------------------------------------------- states

def _listing(root: Path) -> dict[str, int]:
    """Every file under `root` with its size (folders -1; .pyc and direct_url.json -2: they embed the path they
    were compiled at, the wheel's path; a venv keeps an equal fla-core from another wheelhouse), without the
    install lock and the manifest (compared by its entries)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.name == LOCK or p.name in MANIFEST_NAMES:
            continue
        size = (-1 if p.is_dir() and not p.is_symlink() else -2 if p.suffix == ".pyc" or p.name == "direct_url.json"
                else p.lstat().st_size)
        out[str(p.relative_to(root))] = size
    return out


def _manifest_keys(root: Path) -> set[str] | None:
    for p in root.rglob("*"):
        if p.name in MANIFEST_NAMES and p.is_file():
            return set(json.loads(p.read_text())["packages"])
    return None


@dataclass
class State:
    files: dict[str, int]
    freeze: str
    manifest: set[str] | None


def _state(root: Path, python: Path, site: Path, freeze: bool = True) -> State:
    """The site's files, `pip freeze` of it (a venv's; a --target folder is compared by its files) and the
    packages in the manifest under `root` (the venv, or the --target folder)."""
    frozen = subprocess.run([str(python), "-m", "pip", "freeze", "--path", str(site)], capture_output=True,
                            text=True, check=True).stdout if freeze and site.is_dir() else ""
    # `name @ file:///FOLDER/WHEEL#sha256=H`: the same wheel (name and hash) from another folder is the same state
    frozen = re.sub(r"@ file://\S*/([^/\s]+\.whl)", r"@ \1", frozen)
    return State(_listing(site) if site.is_dir() else {}, frozen, _manifest_keys(root) if root.is_dir() else None)


@dataclass
class Setup:
    python: Path
    root: Path  # the --target folder, or the scratch venv (where its manifest lives)
    site: Path  # its site-packages: compared file by file, and by pip freeze for a venv
    args: list[str]

    def state(self) -> State:
        return _state(self.root, self.python, self.site, freeze=self.root != self.site)


@pytest.fixture(scope="module")
def cuda_venv() -> Path:
    return cuda_torch_venv()


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wh = tmp_path_factory.mktemp("wh")
    for pat in ("fla_core-*.whl", "einops-*.whl"):
        for p in pypi_wheels().glob(pat):
            shutil.copy(p, wh)
    return wh


_TEMPLATES: dict[str, Path] = {}


def _prepare(kind: str, where: Path, cuda_venv: Path, wh: Path) -> Setup:
    """A target folder (or scratch venv) holding tqdm and, for "broken", fla-core without einops: the state
    an interrupted install used to leave, which the install repairs by replacing fla-core.
    A target folder is pip-installed once per kind and copied."""
    pre = sorted(pypi_wheels().glob("tqdm-*.whl"))
    if kind.endswith("broken"):
        pre += sorted(pypi_wheels().glob("fla_core-*.whl"))
    pip = ["-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check", "--no-index", "--upgrade"]
    if kind.startswith("venv"):
        venv = scratch_venv(cuda_venv, where / "venv")
        python, root, site, target = venv / "bin" / "python", venv, site_packages(venv), []
        subprocess.run([str(python), *pip, *map(str, pre)], check=True, capture_output=True)
    else:
        python, root = cuda_venv / "bin" / "python", where / "site"
        site, target = root, ["--target", str(root)]
        if kind not in _TEMPLATES:
            _TEMPLATES[kind] = wh.parent / f"template-{kind}"
            subprocess.run([str(python), *pip, "--target", str(_TEMPLATES[kind]), *map(str, pre)], check=True,
                           capture_output=True)
        shutil.copytree(_TEMPLATES[kind], root, symlinks=True)
    args = ["install", "--model", MODEL, "--mode", "infer", "--package", "fla-core", "--arch", "9.0", "--offline",
            "--wheelhouse", str(wh), "--json", *target]
    return Setup(python, root, site, args)


_COMPLETED: dict[str, State] = {}


def _completed(kind: str, cuda_venv: Path, wh: Path, tmp: Path) -> State:
    """What an uninterrupted run of the same install leaves (once per kind of environment)."""
    key = kind.split("-")[0]
    if key not in _COMPLETED:
        s = _prepare(kind, tmp, cuda_venv, wh)
        res = subprocess.run([str(s.python), "-m", "kernelcheck", *s.args], capture_output=True, text=True,
                             env=_env("reference"), cwd=str(REPO), timeout=300)
        data = json.loads(res.stdout)
        assert {e["distribution"] for e in data["installed"]} == {"fla-core", "einops"}, res.stderr[-3000:]
        _COMPLETED[key] = s.state()
    return _COMPLETED[key]


# Where the signal lands: fixed delays (the doctor before the plan, planning), the constraints line (just
# before the wheels are verified and pip starts), pip's own command line and moments into it, the first
# "installed" line (pip and the import check done, manifest written), and the doctor after install.
POINTS = {
    "0.7s": after(0.7),
    "2.0s": after(2.0),
    "before-pip": after_line("constraints:"),
    "pip+0": after_line("$ "),
    "pip+0.3": after_line("$ ", 0.3),
    "pip+0.8": after_line("$ ", 0.8),
    "pip+1.5": after_line("$ ", 1.5),
    "after-pip": after_line("installed "),
    "doctor+0": after_line("doctor after install"),
    "doctor+3": after_line("doctor after install", 3.0),
}
INT, TERM = (signal.SIGINT, "ctrl-c"), (signal.SIGTERM, "kill")
BOTH = ("before-pip", "pip+0.3", "pip+1.5", "after-pip")  # both signals; elsewhere one, alternating
CASES = [(p, *sh, "target-broken" if (i + j) % 2 else "target") for i, p in enumerate(POINTS)
         for j, sh in enumerate((INT, TERM) if p in BOTH else ((INT, TERM)[i % 2],))]
CASES += [("pip+0.8", signal.SIGINT, "kill", "venv"), ("pip+0.3", signal.SIGTERM, "kill", "venv-broken"),
          ("after-pip", signal.SIGTERM, "kill", "venv"), ("doctor+0", signal.SIGINT, "ctrl-c", "venv-broken")]


@pytest.mark.parametrize("point, sig, how, kind", CASES,
                         ids=[f"{k}-{p}-{s.name}-{h}" for p, s, h, k in CASES])
def test_an_interrupted_install_leaves_the_environment_before_or_complete(point, sig, how, kind, cuda_venv,
                                                                          wheelhouse, tmp_path: Path):
    completed = _completed(kind, cuda_venv, wheelhouse, tmp_path / "reference")
    s = _prepare(kind, tmp_path, cuda_venv, wheelhouse)
    before = s.state()
    tmp = tmp_path / "tmp"  # TMPDIR: install's and pip's temp folders, which must all be gone after
    tmp.mkdir()
    run = _interrupt(s.python, s.args, sig, how, POINTS[point], tmp_path, tmp=tmp)
    _assert_interrupted(run, sig)
    assert _temp_left(tmp) == [], f"temp folders left: {_temp_left(tmp)}"
    now = s.state()
    assert not (s.site / ".kernelcheck-txn").exists(), "a journal was left: the rollback did not finish"
    if now.files == before.files:
        assert now.freeze == before.freeze and now.manifest == before.manifest
        assert "nothing was changed" in run.stderr or "rolled back" in run.stderr, \
            run.stderr[-2000:]  # wording: renderer test
    else:
        assert now.files == completed.files, _diff(now.files, before.files, completed.files)
        assert now.freeze == completed.freeze and now.manifest == completed.manifest == {"fla", "einops"}
        assert "the install had completed" in run.stderr, run.stderr[-2000:]  # wording: renderer test
    data = json.loads(run.stdout)  # --json: still one object, saying why there is no verdict
    assert data["exit_code"] == EXIT[sig] and data["verdict"] is None and data["error"]


def test_a_second_ctrl_c_during_the_rollback_does_not_cut_it_short(cuda_venv, wheelhouse, tmp_path: Path):
    """An impatient user presses Ctrl-C again while the first one is being handled."""
    completed = _completed("target", cuda_venv, wheelhouse, tmp_path / "reference")
    s = _prepare("target-broken", tmp_path, cuda_venv, wheelhouse)
    before = s.state()
    hits: list[float] = []

    def twice(stderr: str, elapsed: float, token: str) -> bool:
        if "$ " in stderr and not hits:
            hits.append(elapsed)
        if hits and len(hits) == 1 and elapsed - hits[0] >= 0.8:
            hits.append(elapsed)
            return True
        return False

    token_run = _interrupt_twice(s, twice, tmp_path)
    _assert_interrupted(token_run, signal.SIGINT)
    now = s.state()
    assert now.files in (before.files, completed.files), _diff(now.files, before.files, completed.files)
    assert not (s.site / ".kernelcheck-txn").exists()


def _interrupt_twice(s: Setup, trigger, work: Path) -> Run:
    token = uuid.uuid4().hex
    out, err = work / "twice.out", work / "twice.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen([str(s.python), "-m", "kernelcheck", *s.args], stdout=fo, stderr=fe,
                                env=_env(token), cwd=str(REPO), start_new_session=True)
    started = time.monotonic()
    try:
        while not trigger(err.read_text(errors="replace"), time.monotonic() - started, token):
            assert proc.poll() is None and time.monotonic() - started < 120, err.read_text()[-3000:]
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.05)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        code, left = _ended(proc, token)
    finally:
        _reap(proc)
    return Run(code, out.read_text(), err.read_text(), left, 0.0)


def _temp_left(tmp: Path) -> list[str]:
    """What kernelcheck, pip or a build left in TMPDIR; torch's own cache folder (torchinductor_USER, made
    when fla is imported by the check after install and by doctor) is torch's, and is kept by design."""
    return sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_"))


def _diff(now: dict[str, int], before: dict[str, int], done: dict[str, int]) -> str:
    def d(a: dict[str, int], b: dict[str, int]) -> str:
        extra = sorted(set(a) - set(b))[:8]
        missing = sorted(set(b) - set(a))[:8]
        changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])[:8]
        return f"extra {extra}, missing {missing}, changed {changed}"

    return f"neither before nor completed.\n vs before: {d(now, before)}\n vs completed: {d(now, done)}"


# ---------------------------------------------------------------- a real build

COMPILERS = ("nvcc", "cicc", "cc1plus", "ptxas", "cudafe++", "ninja")


def first_compiler(stderr: str, elapsed: float, token: str) -> bool:
    # once the build has started: the environment probe's own `nvcc --version` is no compile
    return "building " in stderr and any(p.split()[1] in COMPILERS for p in _alive_with(token))


@pytest.mark.parametrize("sig, how", [(signal.SIGINT, "ctrl-c"), (signal.SIGTERM, "kill")],
                         ids=["SIGINT-ctrl-c", "SIGTERM-kill"])
def test_an_interrupted_build_ends_every_compiler_and_changes_nothing(sig, how, cuda_venv, tmp_path: Path):
    from tests.integration.test_install_artifacts import _build_tool_wheels, _real_sdist

    wh = tmp_path / "wh"
    wh.mkdir()
    for p in _build_tool_wheels().glob("*.whl"):
        shutil.copy(p, wh)
    scratch = scratch_venv(cuda_venv, tmp_path / "venv")
    python, site = scratch / "bin" / "python", site_packages(scratch)
    tmp = tmp_path / "tmp"  # the build folder (kernelcheck-build-*) is made here, and must be gone after
    tmp.mkdir()
    before = _state(scratch, python, site)
    args = ["install", "--model", MODEL, "--package", "causal-conv1d", "--arch", "9.0", "--offline", "--source",
            "build", "--sdist", str(_real_sdist()), "--wheelhouse", str(wh), "--jobs", "2", "--json"]
    run = _interrupt(python, args, sig, how, first_compiler, tmp_path, tmp=tmp, timeout=240)
    _assert_interrupted(run, sig)
    # the signal came during the compile
    assert "building causal_conv1d-1.7.0.tar.gz" in run.stderr  # wording: renderer test
    assert _temp_left(tmp) == [], f"build/install folders left: {_temp_left(tmp)}"
    now = _state(scratch, python, site)
    assert now.files == before.files and now.freeze == before.freeze and now.manifest is None
    assert not list(wh.glob("causal_conv1d-*.whl")), "a wheel from an interrupted build was kept"
    # nothing changed: the state above ("nothing was changed" is worded in the interrupted-install test's rollback)


def test_end_group_ends_the_commands_ninja_put_in_groups_of_their_own():
    """ninja runs each command in a process group of its own; ending only pip's group left gcc/cc1plus running
    after kernelcheck exited (CI, SIGTERM during a build). end_group ends the whole session."""
    import sys
    import textwrap

    from kernelcheck.install import build as build_mod

    code = textwrap.dedent("""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], process_group=0)
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert os.getpgid(child) == child != proc.pid  # the child leads a group of its own, in pip's session
    build_mod.end_group(proc, grace=2.0)
    assert proc.poll() is not None and build_mod.group_alive(proc.pid) == []
    try:  # gone, or a zombie waiting for init to reap it
        with open(f"/proc/{child}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "X"
    assert state in ("Z", "X"), state
