"""Arch-targeted source builds of CUDA extension packages (causal-conv1d and its CachedWheels kin).

Upstream setup.py files hard-code a `-gencode` list of up to nine architectures and ignore
TORCH_CUDA_ARCH_LIST, so a build for one H200 compiles eight architectures nobody will run. Here the
sdist is unpacked, its `-gencode` pairs are rewritten to the target architectures only, the upstream
"guess a release wheel URL" step is switched off (`{PREFIX}_FORCE_BUILD=TRUE`: offline it crashes with
an uncaught URLError), and `pip wheel --no-build-isolation --no-deps` compiles against the torch that is
installed (build isolation would fetch a fresh torch from the index). MAX_JOBS is sized from cores and
memory, compile steps are streamed as progress, and the wheel is kept in the wheelhouse for reuse.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kernelcheck.core import gpu, lifeline, signals
from kernelcheck.core.errors import BuildFailed, Interrupted
from kernelcheck.install import wheels

# Each nvcc job of these extensions peaks around 2-4 GiB (measured: causal-conv1d bwd at about 3 GiB
# with --threads 4); budget 4 GiB a job so a build on a small machine is slow rather than OOM-killed.
JOB_MEMORY_BYTES = 4 << 30
# What a setup.py build without isolation imports or runs; provisioned in a throwaway overlay when absent.
BUILD_TOOLS = ("setuptools", "wheel", "ninja", "packaging")

_PAIR = re.compile(
    r"(?P<indent>[ \t]*)(?P<var>\w+)\.append\(\s*[\"']-gencode[\"']\s*\)\s*\n"
    r"[ \t]*(?P=var)\.append\(\s*[\"']arch=compute_(?P<a>\d+a?),code=sm_(?P<b>\d+a?)[\"']\s*\)"
)


@dataclass(frozen=True)
class PatchResult:
    text: str
    kept: tuple[str, ...]  # sm_XX written
    removed: tuple[str, ...]  # sm_XX dropped from the upstream list


@dataclass(frozen=True)
class BuiltWheel:
    path: str
    sha256: str
    arches: tuple[str, ...]
    seconds: float
    max_jobs: int
    log: str
    patch: PatchResult


def memory_available() -> int | None:
    """MemAvailable in bytes (Linux), None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def max_jobs(cores: int | None = None, mem_bytes: int | None = None, per_job: int = JOB_MEMORY_BYTES) -> int:
    """Parallel compile jobs: one per core, but no more than free memory holds (at least 1)."""
    cores = cores or os.cpu_count() or 1
    mem = mem_bytes if mem_bytes is not None else memory_available()
    by_mem = max(1, mem // per_job) if mem else cores
    return max(1, min(cores, by_mem))


def patch_gencode(setup_py: str, arches: tuple[str, ...]) -> PatchResult:
    """Rewrite a setup.py's hard-coded `-gencode` pairs to exactly `arches` ("9.0" -> sm_90).

    The first pair of the least indentation becomes the target list (the unconditional one upstream: sm_75;
    mamba-ssm 2.2.6-2.3.1 open with sm_53..sm_72 under `if bare_metal_version <= Version("12.9")`, which nvcc 13
    skips), every other pair is replaced by `pass`, so conditional blocks stay valid Python. Raises BuildFailed
    when the file has no such pairs (then TORCH_CUDA_ARCH_LIST alone decides, and the caller is told).
    """
    pairs = list(_PAIR.finditer(setup_py))
    if not pairs:
        raise BuildFailed("setup.py has no `-gencode` list to rewrite")
    sms = tuple(str(gpu.cap_to_sm(a)) for a in arches)
    removed = tuple(f"sm_{m['b']}" for m in pairs if m["b"] not in sms)
    outer = min(len(m["indent"].expandtabs()) for m in pairs)
    first = next(i for i, m in enumerate(pairs) if len(m["indent"].expandtabs()) == outer)
    out, last = [], 0
    for i, m in enumerate(pairs):
        out.append(setup_py[last:m.start()])
        ind, var = m["indent"], m["var"]
        if i == first:
            lines = [f'{ind}{var}.append("-gencode")\n{ind}{var}.append("arch=compute_{s},code=sm_{s}")' for s in sms]
            out.append("\n".join(lines) + "  # kernelcheck: target arches only")
        else:
            out.append(f"{ind}pass  # kernelcheck: dropped sm_{m['b']}")
        last = m.end()
    out.append(setup_py[last:])
    return PatchResult("".join(out), tuple(f"sm_{s}" for s in sms), removed)


_STD = re.compile(r"""(["'])-std=c\+\+(\d+)\1""")


def needs_cxx20(torch_mm: str) -> bool:
    """torch >= 2.14's headers `#error` below C++20 (torch/csrc/api/include/torch/all.h)."""
    try:
        major, minor = (int(x) for x in torch_mm.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 14)


def patch_std(setup_py: str, torch_mm: str) -> tuple[str, tuple[str, ...]]:
    """Raise a setup.py's pinned `-std=c++NN` (causal-conv1d 1.7.0 pins c++17 for g++ and nvcc, setup.py
    lines 209-212) to c++20 when the torch built against needs it; (text, the flags rewritten)."""
    if not needs_cxx20(torch_mm):
        return setup_py, ()
    changed: list[str] = []

    def up(m: re.Match[str]) -> str:
        if int(m[2]) >= 20:
            return m[0]
        changed.append(f"-std=c++{m[2]}")
        return f"{m[1]}-std=c++20{m[1]}"

    return _STD.sub(up, setup_py), tuple(changed)


def provision_overlay(dest: Path, wheelhouse: Path | None, offline: bool, python: str = sys.executable,
                      tools: tuple[str, ...] = BUILD_TOOLS, log: Callable[[str], None] = print) -> dict[str, str]:
    """Install the build tools that are not importable into a throwaway folder `dest` (pip --target,
    from the wheelhouse, and PyPI unless offline); returns the environment additions for the build
    (PYTHONPATH, PATH for the ninja binary). Never touches the user's environment."""
    probe = ("import importlib.util, sys; "
             "print(' '.join(t for t in sys.argv[1:] if importlib.util.find_spec(t) is None))")
    res = subprocess.run([python, "-c", probe, *tools], capture_output=True, text=True,
                         preexec_fn=lifeline.preexec())
    missing = res.stdout.split()
    if shutil.which("ninja") is None and "ninja" not in missing:
        missing.append("ninja")  # the module without its binary: torch runs `ninja --version`
    if not missing:
        return {}
    cmd = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input", "--no-deps",
           "--only-binary", ":all:", "--target", str(dest)]
    if wheelhouse is not None and wheelhouse.is_dir():
        cmd += ["--find-links", str(wheelhouse)]
    if offline:
        cmd += ["--no-index"]
    log(f"  build overlay {dest}: {', '.join(missing)} (only for this build)")
    together = subprocess.run([*cmd, *missing], capture_output=True, text=True,
                              preexec_fn=lifeline.preexec())  # one call: one bin/ folder
    for tool in missing if together.returncode != 0 else ():
        done = subprocess.run([*cmd, "--upgrade", tool], capture_output=True, text=True,
                              preexec_fn=lifeline.preexec())
        if done.returncode == 0:
            continue
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        if tool in ("setuptools", "wheel"):  # setup.py imports them: no build without them
            raise BuildFailed(f"cannot provision {tool} for the build overlay (wheelhouse"
                              f"{'' if offline else ' or PyPI'}): {tail}")
        log(f"  build overlay: {tool} not available ({'offline, ' if offline else ''}not in the wheelhouse): "
            + ("the compile runs serially, MAX_JOBS has no effect" if tool == "ninja" else "continuing"))
    bins = [str(dest / "bin")] + [str(p) for p in (dest / "ninja" / "data" / "bin",) if p.is_dir()]
    return {"PYTHONPATH": str(dest), "PATH": os.pathsep.join(bins)}


def _with_overlay(env: dict[str, str], add: dict[str, str]) -> None:
    for k, v in add.items():
        env[k] = os.pathsep.join([v, env[k]]) if env.get(k) else v


def nvcc_arches(nvcc: str) -> tuple[str, ...]:
    """`nvcc --list-gpu-arch`: compute_XX this compiler can target."""
    try:
        res = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=30,
                             preexec_fn=lifeline.preexec())
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in res.stdout.splitlines() if line.strip().startswith("compute_"))


def _unpack(sdist: Path, dest: Path) -> Path:
    try:
        with tarfile.open(sdist) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")
            else:
                # Python < 3.11.4 (Debian bookworm's 3.11.2, common in CUDA base images) has no
                # extraction filters: refuse what the "data" filter would, then extract.
                root = dest.resolve()
                for m in tf.getmembers():
                    if not (m.isfile() or m.isdir()) or not (root / m.name).resolve().is_relative_to(root):
                        raise tarfile.TarError(f"unsafe member {m.name!r} (link, device or outside the folder)")
                tf.extractall(dest)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BuildFailed(f"cannot unpack {sdist.name}: {type(exc).__name__}: {exc}") from None
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1 or not (tops[0] / "setup.py").exists():
        raise BuildFailed(f"{sdist.name} is not a setup.py sdist (expected one top folder with setup.py)")
    return tops[0]


def _stream(proc: subprocess.Popen[str], log_fh: IO[str], progress: Callable[[str], None], started: float) -> None:
    """Copy pip's output to the log; report each compile step and a heartbeat every 30 s."""
    last = [time.monotonic()]
    done = threading.Event()

    def beat() -> None:
        while not done.wait(5):
            if time.monotonic() - last[0] >= 30:
                progress(f"  ... still compiling ({time.monotonic() - started:.0f} s)")
                last[0] = time.monotonic()

    t = threading.Thread(target=beat, daemon=True)
    t.start()
    step = re.compile(r"^\s*\[(\d+)/(\d+)\]\s+(.*)$")
    for line in proc.stdout:  # type: ignore[union-attr]
        log_fh.write(line)
        m = step.match(line)
        if m:
            src = re.findall(r"(\S+\.(?:cu|cpp|c|cc))\b", m[3])
            what = Path(src[-1]).name if src else ("link" if " -shared " in m[3] or "g++" in m[3] else m[3][:60])
            progress(f"  [{m[1]}/{m[2]}] {what}  ({time.monotonic() - started:.0f} s)")
            last[0] = time.monotonic()
        elif re.search(r"\berror:", line) or re.search(r"\(\d+\): error", line):
            progress(f"  {line.rstrip()[:200]}")
    done.set()


def switches(env_prefix: str, package_env: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The variables that make an upstream setup.py build its CUDA extension from source, in order:
    `{PREFIX}_FORCE_BUILD=TRUE` (never guess/download a release wheel: offline it raises an uncaught URLError),
    `{PREFIX}_SKIP_CUDA_BUILD=FALSE` (a TRUE left in the environment, as for a `pip download` of the sdist, would
    build a wheel without the extension), then the package's own `build_env` of matrix/packages.toml (mamba-ssm:
    MAMBA_KEEP_CUDA_BUILD=TRUE, without which its main builds no selective_scan_cuda since mamba#977)."""
    out = {f"{env_prefix}_FORCE_BUILD": "TRUE", f"{env_prefix}_SKIP_CUDA_BUILD": "FALSE"} if env_prefix else {}
    out.update(package_env)
    return out


def build_environ(base: dict[str, str], *, env_prefix: str, package_env: tuple[tuple[str, str], ...] = (),
                  arches: tuple[str, ...], torch_mm: str, cuda_major: int, cxx11abi: bool, jobs: int, tmp: Path,
                  cuda_home: str | None = None, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment `pip wheel` of a source build runs with (pure: `base` is the caller's os.environ)."""
    env = dict(base)
    env.update(switches(env_prefix, package_env))
    env.update({
        f"{env_prefix}_LOCAL_VERSION": wheels.local_version(cuda_major, torch_mm, cxx11abi),
        "TORCH_CUDA_ARCH_LIST": ";".join(arches),  # for any extension torch adds flags to
        "MAX_JOBS": str(jobs),
        "PIP_NO_INPUT": "1",
        # pip's own temp folders (its copy of the source tree, objects ...) inside the build folder: a pip
        # ended by a signal cannot clean them up, and they go with the build folder
        "TMPDIR": str(tmp / "tmp"),
    })
    if cxx11abi:
        env[f"{env_prefix}_FORCE_CXX11_ABI"] = "TRUE"
    if cuda_home and not env.get("CUDA_HOME"):
        env["CUDA_HOME"] = cuda_home  # torch guesses it from nvcc on PATH, which may be a wrapper script
    env.update(extra_env or {})
    return env


def build_wheel(sdist: Path, *, arches: tuple[str, ...], wheelhouse: Path, env_prefix: str, torch_mm: str,
                cuda_major: int, cxx11abi: bool, python: str = sys.executable, jobs: int | None = None,
                progress: Callable[[str], None] = print, extra_env: dict[str, str] | None = None,
                cuda_home: str | None = None, constraints: Path | None = None, overlay_from: Path | None = None,
                offline: bool = True, package_env: tuple[tuple[str, str], ...] = (),
                extension: str = "") -> BuiltWheel:
    """Build `sdist` for `arches` against the installed torch; the wheel lands in `wheelhouse`."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    logs = wheelhouse / "logs"
    logs.mkdir(exist_ok=True)
    jobs = jobs or max_jobs()
    with tempfile.TemporaryDirectory(prefix="kernelcheck-build-") as tmp:
        src = _unpack(sdist, Path(tmp) / "src")
        setup_py = src / "setup.py"
        patch = patch_gencode(setup_py.read_text(encoding="utf-8"), arches)
        text, std = patch_std(patch.text, torch_mm)
        setup_py.write_text(text, encoding="utf-8")
        progress(f"  patched setup.py: -gencode {', '.join(patch.kept)} only"
                 + (f" (dropped upstream {', '.join(patch.removed)})" if patch.removed else "")
                 + (f"; {', '.join(std)} -> -std=c++20 for torch {torch_mm}" if std else ""))
        env = build_environ(dict(os.environ), env_prefix=env_prefix, package_env=package_env, arches=arches,
                            torch_mm=torch_mm, cuda_major=cuda_major, cxx11abi=cxx11abi, jobs=jobs, tmp=Path(tmp),
                            cuda_home=cuda_home, extra_env=extra_env)
        _with_overlay(env, provision_overlay(Path(tmp) / "overlay", overlay_from, offline, python, log=progress))
        (Path(tmp) / "tmp").mkdir()
        out_dir = Path(tmp) / "dist"
        sm = "_".join(str(gpu.cap_to_sm(a)) for a in arches)
        log_path = logs / f"{sdist.name.removesuffix('.tar.gz')}-sm{sm}.log"
        cmd = [python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index", "-v",
               "--disable-pip-version-check", "-w", str(out_dir), str(src)]
        if constraints is not None:
            cmd[4:4] = ["-c", str(constraints)]  # torch/triton/transformers pinned, as in every pip call
        progress(f"  building {sdist.name} for {', '.join(patch.kept)} with MAX_JOBS={jobs} (log: {log_path})")
        started = time.monotonic()
        with open(log_path, "w", encoding="utf-8") as log_fh:
            log_fh.write("$ " + " ".join(cmd) + "\n")
            # its own process group: on SIGINT/SIGTERM/any error the whole group (pip, ninja, nvcc, cicc,
            # cc1plus) is ended before the build folder goes away
            with signals.held(reraise=False) as came:  # not lost in Popen's at-fork hooks (install/apply.py)
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        cwd=str(src), errors="replace", start_new_session=True,
                                        preexec_fn=lifeline.preexec())  # dies with kernelcheck (core/lifeline.py)
                lifeline.note_child(proc.pid)  # its group, ended by the next install if kernelcheck dies first
            try:
                if came:
                    raise Interrupted(came[0])
                _stream(proc, log_fh, progress, started)
                rc = proc.wait()
            except BaseException:
                end_group(proc)
                raise
        seconds = time.monotonic() - started
        built = sorted(out_dir.glob("*.whl")) if out_dir.exists() else []
        if rc != 0 or not built:
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
            raise BuildFailed(f"building {sdist.name} failed after {seconds:.0f} s (pip exit {rc}); nothing was "
                              f"installed. Last lines of {log_path}:\n" + "\n".join(tail))
        _require_extension(built[0], extension, env_prefix, package_env, log_path)
        dest = wheelhouse / built[0].name
        tmp_dest = wheelhouse / f".{built[0].name}.tmp"
        shutil.copyfile(built[0], tmp_dest)
        os.replace(tmp_dest, dest)  # atomic: a concurrent reader sees the old file or the whole new one
    info = wheels.inspect_wheel(dest)
    found = tuple(sorted({a for v in (info.so_arches.values() if info else ()) for a in v}))
    sidecar = {"built_by": "kernelcheck", "sdist": sdist.name, "torch_mm": torch_mm, "cuda_major": cuda_major,
               "cxx11abi": cxx11abi, "arches": list(arches), "so_arches": list(found), "seconds": round(seconds, 1),
               "max_jobs": jobs, "sha256": info.sha256 if info else "", "date": time.strftime("%Y-%m-%d")}
    write_sidecar(dest, sidecar)
    return BuiltWheel(str(dest), info.sha256 if info else "", found, seconds, jobs, str(log_path), patch)


def _require_extension(wheel: Path, extension: str, env_prefix: str, package_env: tuple[tuple[str, str], ...],
                       log_path: Path) -> None:
    """A build that produced a wheel without the package's extension module (upstream skipped it: mamba-ssm's main
    since mamba#977 without MAMBA_KEEP_CUDA_BUILD) fails here, before the wheel reaches the wheelhouse."""
    if not extension:
        return
    info = wheels.inspect_wheel(wheel)
    if info is not None and wheels.has_extension(info, extension):
        return
    keep = " ".join(f"{k}={v}" for k, v in switches(env_prefix, package_env).items())
    raise BuildFailed(f"building {wheel.name} produced no {extension} extension module (the setup.py skipped its "
                      f"CUDA build although the build ran with {keep}); nothing was installed. Build log: {log_path}")


def end_group(proc: subprocess.Popen[str], grace: float = 5.0) -> None:
    """SIGTERM the process group of `proc`, SIGKILL what is left after `grace` seconds, and return only when
    no process of the group is alive (ninja, nvcc, cicc, cc1plus outlive pip by a moment otherwise)."""
    import signal

    pgid = proc.pid  # started with start_new_session: its own session and group, whose id is its pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _signal_session(pgid, sig):
            break
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 0)
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not group_alive(pgid):
            break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    deadline = time.monotonic() + grace
    while group_alive(pgid) and time.monotonic() < deadline:  # SIGKILLed members finishing their exit
        _signal_session(pgid, signal.SIGKILL)
        time.sleep(0.05)


def _signal_session(pgid: int, sig: int) -> bool:
    """`sig` to the group and to every other live process of the session (ninja runs each command in a process
    group of its own: gcc and cc1plus left that way outlived kernelcheck); False when none was there."""
    hit = False
    try:
        os.killpg(pgid, sig)
        hit = True
    except ProcessLookupError:
        pass
    for pid in group_alive(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            hit = True
    return hit


def group_alive(pgid: int) -> list[int]:
    """Processes of group `pgid`, or of the session it leads (the build's pip was started in a new session: its
    id is the group's), that are still running (zombies excluded), from /proc."""
    out = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 3 and str(pgid) in (fields[2], fields[3]) and fields[0] not in ("Z", "X"):
            out.append(int(pid))
    return out


def sidecar_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".kernelcheck.json")


def write_sidecar(wheel: Path, data: dict[str, Any]) -> None:
    p = sidecar_path(wheel)
    tmp = p.with_name("." + p.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, p)


def read_sidecar(wheel: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(sidecar_path(wheel).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
