"""Carry out an install plan: lock, fetch/build and verify every wheel, install with torch pinned, check, record.

Order matters for "a failed build leaves the environment as it was": every artifact is prepared and
verified first (download, build, sha256, tags, GPU arch in the .so), and only then is anything
installed, in one pip call with `--no-deps` and a constraints file pinning the installed torch, triton
and transformers. After pip, each kernel package must import in a fresh process; if one does not, the
new files are removed and the replaced versions restored from a backup.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck.core import gpu, lifeline, manifest, matrix, signals
from kernelcheck.core.environment import Environment, dist_version
from kernelcheck.core.errors import InstallFailed, Interrupted
from kernelcheck.core.plan_step import Step
from kernelcheck.core.version import __version__
from kernelcheck.install import build, wheels
from kernelcheck.install.plan_types import PINNED, Plan
from kernelcheck.install.txn import (  # the transaction pip runs inside
    TXN,
    begin,
    deferred_signals,
    end_txn,
    rollback_site,
    sigterm_as_interrupt,
    site_dir,
)


@dataclass
class Outcome:
    installed: list[dict[str, Any]] = field(default_factory=list)  # manifest entries written
    failed: str | None = None
    manifest: str | None = None
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- locking

@contextmanager
def locked(paths: list[Path], progress: Callable[[str], None] = print) -> Iterator[None]:
    """Exclusive fcntl locks on `paths` (taken in sorted order: no deadlock between two installs)."""
    fhs = []
    try:
        for p in sorted({p.resolve() for p in paths}):
            p.parent.mkdir(parents=True, exist_ok=True)
            fh = open(p, "a+", encoding="utf-8")  # noqa: SIM115 - held until the install ends
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = (fh.read().strip() or "another process").splitlines()[0]
                progress(f"waiting for another kernelcheck install to finish ({holder}, lock {p}) ...")
                fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            lifeline.end_orphans(fh.read(), progress)  # a pip whose kernelcheck died holding this lock
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}\n")
            fh.flush()
            fhs.append(fh)
            lifeline.hold(fh)
        yield
    finally:
        for fh in reversed(fhs):
            lifeline.release(fh)
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()


def lock_paths(wheelhouse: Path, target: str | None) -> list[Path]:
    site = site_dir(target)
    env_lock = site / ".kernelcheck-install.lock"
    if not os.access(site if site.exists() else site.parent, os.W_OK):
        key = hashlib.sha256(str(site).encode()).hexdigest()[:12]
        env_lock = Path(tempfile.gettempdir()) / f"kernelcheck-install-{key}.lock"
    return [wheelhouse / ".kernelcheck.lock", env_lock]


# ---------------------------------------------------------------- constraints and pip

def constraints_text(env: Environment, allow_change: frozenset[str]) -> str:
    """`torch==X`, `triton==Y`, `transformers==Z` for what is installed (minus what the user lets change).

    X is the version pip sees, the distribution's metadata, not `torch.__version__`: images built from
    source or repackaged often install torch whose metadata says 2.11.0 while it reports 2.11.0+cu130
    (the H200 image does), and `torch==2.11.0+cu130` then matches nothing pip knows: ResolutionImpossible."""
    lines = ["# written by kernelcheck install: the installed torch, triton and transformers may not change"]
    for name in PINNED:
        v = _pip_version(name, env.version_of(name))
        if v and name not in allow_change:
            lines.append(f"{name}=={v}")
    return "\n".join(lines) + "\n"


def _pip_version(name: str, probed: str | None) -> str | None:
    """The installed distribution's metadata version when it is the probed one up to a local label."""
    from packaging.version import InvalidVersion, Version

    meta = dist_version(name)
    try:
        if meta and probed and Version(meta).public == Version(probed).public:
            return meta
    except InvalidVersion:
        pass
    return probed


def _pip_install(files: list[str], constraints: Path, target: str | None, log: Callable[[str], None]) -> None:
    """pip in its own session, its temp folders beside the constraints file (removed with it even when pip
    is ended by a signal and cannot clean up)."""
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
           "--no-input", "-c", str(constraints)]
    if target:
        cmd += ["--target", target, "--upgrade"]
    cmd += files
    log("  $ " + " ".join(cmd))
    # its own session: a Ctrl-C reaches kernelcheck, which ends pip's whole group and rolls back
    scratch = constraints.parent / "pip-tmp"
    scratch.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(scratch))
    # tied to this process (core/lifeline.py): a SIGKILL of kernelcheck's group must not leave pip writing
    # SIGINT/SIGTERM held while Popen forks: with a preexec_fn, Python runs its at-fork hooks (logging's lock) in
    # this process, and an Interrupted raised inside one is printed as "Exception ignored" and lost
    with signals.held(reraise=False) as came:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env=env, preexec_fn=lifeline.preexec())  # prctl only, no locks taken
        lifeline.note_child(proc.pid)
    try:
        if came:
            raise Interrupted(came[0])
        out, err = proc.communicate()
    except BaseException:
        build.end_group(proc)
        raise
    res = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-8:])
        raise InstallFailed(f"pip install failed (exit {res.returncode}); pip rolled its own changes back:\n{tail}")


# ---------------------------------------------------------------- prepare (nothing installed yet)

def _download(url: str, wheelhouse: Path, log: Callable[[str], None]) -> Path:
    import requests

    dest = wheelhouse / url.rsplit("/", 1)[-1].replace("%2B", "+")
    if dest.exists():
        return dest
    log(f"  downloading {url}")
    tmp = dest.with_name("." + dest.name + ".part")
    try:
        with requests.get(url, stream=True, timeout=60) as r:
            r.raise_for_status()
            with open(tmp, "wb") as fh:
                for chunk in r.iter_content(1 << 20):
                    fh.write(chunk)
    except Exception as exc:  # noqa: BLE001
        tmp.unlink(missing_ok=True)
        raise InstallFailed(f"downloading the release wheel failed ({type(exc).__name__}: {exc}); nothing was "
                            "installed") from None
    os.replace(tmp, dest)
    return dest


def _record_verified(path: Path, info: wheels.WheelInfo, reason: str, trial: wheels.TrialImport,
                     plan: Plan) -> None:
    """Write what was verified about an unlabelled wheel into its sidecar (.kernelcheck.json)."""
    data = dict(info.sidecar or {})
    data.update({"verified_by": "kernelcheck trial import", "verified": reason, "trial_module": trial.module,
                 "torch": trial.torch, "torch_mm": plan.target.torch_mm, "cuda_major": plan.target.cuda_major,
                 "cxx11abi": plan.target.cxx11abi, "python": plan.target.python_tag,
                 "so_arches": sorted({a for v in info.so_arches.values() for a in v}), "sha256": info.sha256,
                 "date": time.strftime("%Y-%m-%d")})
    try:
        build.write_sidecar(path, data)
    except OSError:  # a read-only wheelhouse: the manifest still records it
        pass


def private_copy(path: Path, folder: Path | None) -> Path:
    """The wheel copied into `folder` (this install's own temporary folder, mode 0700), the file that is then
    verified and handed to pip: a wheel swapped in the wheelhouse after its check (an atomic rename the moment
    pip starts) cannot be what pip installs. None: verify in place (no install follows)."""
    if folder is None:
        return path
    folder.mkdir(mode=0o700, exist_ok=True)
    dest = folder / path.name
    try:
        shutil.copyfile(path, dest)
    except OSError as exc:
        raise InstallFailed(f"{path} cannot be copied for verification ({exc.strerror or exc}) into {folder}. "
                            "Nothing was installed.") from None
    return dest


def _verify(step: Step, path: Path, plan: Plan, pkg: matrix.PackageInfo | None,
            expected_sha: str, step_target: str | None = None, torch_version: str = "",
            private: Path | None = None) -> wheels.WheelInfo:
    """`path` verified as the copy pip will install (`private_copy` into `private`); the sidecar is read from,
    and written beside, the wheelhouse's file."""
    sidecar = build.read_sidecar(path)
    original, path = path, private_copy(path, private)
    info = wheels.inspect_wheel(path, sidecar)
    if info is None:
        raise InstallFailed(f"{path.name} is not a wheel file name")
    if pkg is not None and pkg.kind == "cuda-extension":
        trial = None
        if info.build is None and any(info.so_arches.values()) and plan.target.cuda_major is not None:
            from kernelcheck.install.trial import trial_import  # unlabelled wheel: try it again, here

            trial = trial_import(info, pkg.extension, step_target, torch_version)
        d = wheels.match(info, plan.target, expected_sha256=expected_sha or None, extension=pkg.extension,
                         trial=trial)
        if d.accepted and trial is not None:
            _record_verified(original, info, d.reason, trial, plan)
    else:
        d = wheels.file_and_tags_failure(info, plan.target, expected_sha or None) or \
            wheels.Decision(info.name.filename, True, "tags fit")  # a pure wheel or a dependency
    if not d.accepted:
        raise InstallFailed(f"{path.name} rejected: {d.reason}. Nothing was installed.")
    return info


def prepare(plan: Plan, env: Environment, wheelhouse: Path, log: Callable[[str], None],
            jobs: int | None = None, constraints: Path | None = None,
            offline: bool = True, target: str | None = None, *,
            m: matrix.Matrix) -> list[tuple[Step, wheels.WheelInfo, dict[str, Any]]]:
    """Every wheel to install, fetched or built and verified; raises before anything is installed."""
    out = []
    for step in plan.steps:
        if step.action not in ("install", "build"):
            continue
        pkg = m.packages.get(step.import_name) if step.import_name else None
        how: dict[str, Any] = {"source": step.source}
        if step.action == "build":
            assert pkg is not None and env.torch is not None
            t = plan.target
            log(f"build {step.package} from {Path(step.artifact).name} for {', '.join(step.arches)}")
            built = build.build_wheel(
                Path(step.artifact), arches=t.arches, wheelhouse=wheelhouse, env_prefix=pkg.env_prefix,
                torch_mm=t.torch_mm, cuda_major=t.cuda_major or 0, cxx11abi=bool(t.cxx11abi), jobs=jobs,
                progress=log, cuda_home=env.cuda_home, constraints=constraints, overlay_from=wheelhouse,
                offline=offline, package_env=pkg.build_env, extension=pkg.extension)
            log(f"  built {Path(built.path).name} in {built.seconds:.0f} s, GPU code {', '.join(built.arches)}, "
                f"sha256 {built.sha256[:16]}...")
            path, expected = Path(built.path), built.sha256
            how.update({"sdist": Path(step.artifact).name, "build_seconds": round(built.seconds, 1),
                        "max_jobs": built.max_jobs, "nvcc": env.nvcc or "", "build_log": built.log,
                        "gencode_removed": list(built.patch.removed)})
        elif step.source == "release":
            path, expected = _download(step.artifact, wheelhouse, log), ""
        else:
            path, expected = Path(step.artifact), step.sha256
        private = constraints.parent / "verified" if constraints is not None else None
        info = _verify(step, path, plan, pkg, expected, target, env.torch.version if env.torch else "", private)
        out.append((step, info, how))
    return out


# ---------------------------------------------------------------- execute

def _import_check(modules: list[str], target: str | None) -> str | None:
    env = dict(os.environ)
    if target:
        env["PYTHONPATH"] = os.pathsep.join([target, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    res = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, env=env,
                         preexec_fn=lifeline.preexec(),
                         cwd=tempfile.gettempdir())
    if res.returncode == 0:
        return None
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {res.returncode}"


def _check_imports(ready: list[tuple[Step, wheels.WheelInfo, dict[str, Any]]], env: Environment, target: str | None,
                   m: matrix.Matrix) -> str | None:
    modules: list[str] = []
    real_gpu = env.gpu_source in ("torch", "nvidia-smi")
    for step, _, _ in ready:
        pkg = m.packages.get(step.import_name) if step.import_name else None
        if pkg is not None and real_gpu:
            modules.extend(pkg.probe_modules)  # what doctor and transformers import
        elif pkg is not None:
            # no GPU here (a build stage): modules that may touch the device at import are not tried
            modules.extend([pkg.name.split(".")[0]] + ([pkg.extension] if pkg.extension else []))
    err = _import_check(modules, target) if modules else None
    return f"`import {' '.join(modules)}` fails in a fresh process: {err}" if err else None


def execute(plan: Plan, env: Environment, wheelhouse: Path, target: str | None, allow_change: frozenset[str],
            log: Callable[[str], None] = print, jobs: int | None = None, offline: bool = True, *,
            m: matrix.Matrix) -> Outcome:
    """Carry out `plan` (the caller holds the locks). Raises InstallFailed/BuildFailed, env unchanged.

    SIGINT/SIGTERM raise Interrupted whose `detail` says what was left: before pip, nothing was changed
    (a build's process group is ended, its folder removed); from the journal on until the commit, the site
    and manifest are rolled back; after the commit (journal removed) the install is complete."""
    started = time.monotonic()
    outcome = Outcome()
    site = site_dir(target)
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="kernelcheck-install-") as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text(constraints_text(env, allow_change), encoding="utf-8")
        log("constraints: " + ", ".join(ln for ln in constraints.read_text().splitlines()[1:]))
        try:
            ready = prepare(plan, env, wheelhouse, log, jobs, constraints, offline, target, m=m)
        except KeyboardInterrupt as exc:
            raise Interrupted.of(exc, "stopped before anything was installed (a build's processes were ended and "
                                      "its folder removed): nothing was changed.") from None
        if not ready:
            outcome.seconds = time.monotonic() - started
            return outcome
        dists = [info.name.name for _, info, _ in ready]
        files = [info.path for _, info, _ in ready]
        where = manifest.target_path(target) if target else None
        manifest.check(where or manifest.path())  # a corrupt manifest is bad input before pip changes anything
        txn: Path | None = None
        try:
            site.mkdir(parents=True, exist_ok=True)
            txn = begin(site, dists, files, where or manifest.path())
            _pip_install(files, constraints, target, log)
            err = _check_imports(ready, env, target, m)
            if err:
                raise InstallFailed(f"after install, {err}. The new packages were removed and the previous "
                                    "state restored.")
            _record(ready, plan, env, site, where, outcome)  # inside the transaction: undone with the rest
            with deferred_signals() as came:
                end_txn(txn)  # the commit
                txn = None
        except BaseException as exc:
            if txn is not None:
                with deferred_signals():
                    rollback_site(site, txn)
                log("interrupted or failed: the install was rolled back (site-packages as before)")
            elif (site / TXN).exists() and not (site / TXN / "journal.json").exists():
                shutil.rmtree(site / TXN, ignore_errors=True)  # a backup begun, pip never ran
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted.of(exc, f"the install was rolled back: {site} is as it was before, nothing was "
                                          "changed.") from None
            raise
    if came:  # a signal during the commit: the install is complete, and then interrupted
        raise Interrupted(came[0], _completed_detail(outcome))
    outcome.seconds = time.monotonic() - started
    return outcome


def _completed_detail(outcome: Outcome) -> str:
    what = ", ".join(f"{e['distribution']} {e['version']}" for e in outcome.installed)
    return (f"the install had completed ({what}; manifest {outcome.manifest}), but no verdict was reached: run "
            "`kernelcheck doctor` for it.")


def _record(ready: list[tuple[Step, wheels.WheelInfo, dict[str, Any]]], plan: Plan, env: Environment, site: Path,
            where: Path | None, outcome: Outcome) -> None:
    for step, info, how in ready:
        entry = {
            "distribution": info.name.name, "version": info.name.version, "spec": step.spec,
            "wheel": Path(info.path).name, "sha256": info.sha256,
            "so_arches": sorted({a for v in info.so_arches.values() for a in v}),
            "target_arches": [f"sm_{gpu.cap_to_sm(a)}" for a in plan.target.arches] if info.so_arches else [],
            "torch": env.torch.version if env.torch else None, "torch_mm": plan.target.torch_mm,
            "cuda": env.torch.cuda if env.torch else None, "cxx11abi": plan.target.cxx11abi,
            "python": env.python_tag, "platform": env.platform, "triton": env.triton,
            "transformers": env.transformers, "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "site": str(site), "kernelcheck": __version__, **how,
        }
        key = step.import_name or info.name.name
        p = manifest.record(key, entry, where)
        outcome.manifest = str(p)
        outcome.installed.append(entry)
