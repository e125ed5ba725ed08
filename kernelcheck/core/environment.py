"""Probe the machine: Python, torch, CUDA, GPUs, driver, nvcc and each kernel package.

Detection only (nothing installed or changed); anything absent is reported as absent (None / empty), never raised.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import importlib.metadata as md
import importlib.util
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.version import InvalidVersion, Version

from kernelcheck.core import matrix, signals
from kernelcheck.core.capability import Capability
from kernelcheck.core.requirements import requirements_unmet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gpu:
    name: str
    capability: Capability  # "9.0" in JSON; a word given here is parsed once
    index: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "capability", Capability.parse(self.capability))


@dataclass(frozen=True)
class TorchInfo:
    version: str
    cuda: str | None  # torch.version.cuda, None for CPU builds
    cxx11abi: bool | None
    hip: str | None = None
    cuda_available: bool = False
    import_error: str | None = None  # "SystemExit: ..." when torch is here but does not import; JSON: in version


def torch_minor(version: str | None) -> str | None:
    """The one spelling of torch's major.minor ("2.11.0+cu130" -> "2.11"): matrix/torch.toml's key, a wheel tag's
    torch2.11, the manifest's torch_mm. None without a version, or for one packaging cannot read."""
    if not version:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return f"{v.major}.{v.minor}"


@dataclass(frozen=True)
class PackageState:
    """One kernel package as found: version per distribution, and whether it imports."""

    name: str  # import name
    installed: bool
    version: str | None
    distribution: str | None
    imports: bool
    error: str | None  # the real exception text when an import fails
    location: str | None = None
    extension_path: str | None = None


@dataclass(frozen=True)
class Environment:
    python: str
    python_tag: str  # "cp311"
    platform: str  # "linux_x86_64"
    torch: TorchInfo | None
    triton: str | None
    transformers: str | None
    kernels: str | None
    gpus: tuple[Gpu, ...]
    driver: str | None
    nvcc: str | None
    cuda_home: str | None
    packages: dict[str, PackageState] = field(default_factory=dict)
    present: dict[str, bool] = field(default_factory=dict)  # extra import names looked up (tilelang...)
    env_vars: dict[str, str] = field(default_factory=dict)
    gpu_source: str = "none"  # torch | nvidia-smi | override | none
    # the nvcc TileLang's JIT would use (tilelang.env._find_cuda_home's order) and what it is: "toolkit" (a CUDA
    # toolkit's), "pip" (pip's nvidia-cuda-nvcc: measured not to work for TileLang's JIT), "none"
    nvcc_source: str = "none"
    nvcc_path: str | None = None
    # the nvcc TileLang's JIT compiles with, where it differs from what fla's has_usable_nvcc finds: with CUDA_HOME
    # (or CUDA_PATH) set, tilelang uses $CUDA_HOME/bin/nvcc only; "cuda-home-no-nvcc" when that file is missing
    # (nvcc on PATH is then not used). None: the same nvcc as nvcc_source.
    jit_nvcc_source: str | None = None
    # "dist:requirement" pairs (from the breakage rules) whose installed versions miss dist's own Requires-Dist;
    # None: not probed (rules then read the installed metadata themselves)
    requirements_unmet: tuple[str, ...] | None = None

    @property
    def cuda_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        return tuple(sorted({g.capability for g in self.gpus}))

    def version_of(self, name: str) -> str | None:
        """Version of torch/triton/transformers/kernels/nvcc or of a kernel package by import name."""
        if name == "torch":
            return self.torch.version if self.torch else None
        if name in ("triton", "transformers", "kernels", "nvcc"):
            value: str | None = getattr(self, name)
            return value
        st = self.packages.get(name)
        return st.version if st and st.installed else None


def dist_version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a broken dist-info must not crash the probe
        log.info("distribution %s: unreadable metadata (%s: %s); treated as absent", name, type(exc).__name__, exc)
        return None


def _probe_torch(after_import: Callable[[], None] | None = None) -> TorchInfo | None:
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        with signals.held(second_interrupts=True):  # torch's C code swallows a Ctrl-C inside its numpy import
            import torch
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - torch present but broken, a SystemExit in its import too:
        # reported as absent with the reason in import_error (doctor: BROKEN, exit 4), in words in version
        why = f"{type(exc).__name__}: {exc}"
        return TorchInfo(version=f"unimportable ({why})", cuda=None, cxx11abi=None, import_error=why)
    if after_import is not None:
        after_import()  # before any CUDA call (doctor forks its import children here)
    cuda = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    try:
        abi = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    except AttributeError:
        log.info("torch %s has no _GLIBCXX_USE_CXX11_ABI: cxx11abi unknown", torch.__version__)
        abi = None
    try:
        avail = bool(torch.cuda.is_available())
    except Exception as exc:  # noqa: BLE001 - a broken CUDA runtime raises many kinds of error
        log.info("torch.cuda.is_available() failed (%s: %s): no CUDA GPU counted", type(exc).__name__, exc)
        avail = False
    return TorchInfo(version=torch.__version__, cuda=cuda, cxx11abi=abi, hip=hip, cuda_available=avail)


def _gpus_from_torch() -> tuple[Gpu, ...]:
    import torch

    out = []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        out.append(Gpu(name=torch.cuda.get_device_name(i), capability=Capability(major, minor), index=i))
    return tuple(out)


def _run(cmd: list[str], timeout: float = 10) -> str | None:
    exe = shutil.which(cmd[0])
    if not exe:
        return None
    from kernelcheck.core import child

    try:  # bounded in time and output: an `nvcc --version` that writes forever is ended, not read whole
        res = child.run([exe, *cmd[1:]], timeout, limit=1 << 20, stderr=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.output if res.code == 0 else None


def _nvidia_smi() -> tuple[tuple[Gpu, ...], str | None]:
    out = _run(["nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"])
    if not out:
        return (), None
    gpus, driver = [], None
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4:
            try:
                gpus.append(Gpu(parts[1], Capability.parse(parts[2]), int(parts[0]) if parts[0].isdigit() else 0))
            except ValueError:  # an old driver prints [N/A]: no capability to check kernels against
                log.info("nvidia-smi gives GPU %s no compute capability (%r): not counted", parts[0], parts[2])
            driver = parts[3]
    return tuple(gpus), driver


def _driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", fh.read())
            return m.group(1) if m else None
    except OSError:
        return None


def nvcc_version(cuda_home: str | None = None) -> tuple[str | None, str | None]:
    """(version, path) of nvcc: CUDA_HOME/bin/nvcc first, then PATH."""
    candidates = []
    if cuda_home:
        candidates.append(os.path.join(cuda_home, "bin", "nvcc"))
    which = shutil.which("nvcc")
    if which:
        candidates.append(which)
    for path in candidates:
        if os.path.exists(path):
            out = _run([path, "--version"])
            if out:
                m = re.search(r"release ([\d.]+)", out)
                if m:
                    return m.group(1), path
    return None, None


def pip_nvcc() -> str | None:
    """The nvcc inside pip's nvidia-cuda-nvcc wheel, if installed (>= 13.0 ships one; the -cu12 wheels only ptxas).
    fla's has_usable_nvcc and tilelang's _find_cuda_home both look for it; it is a compiler, not a toolkit."""
    if not dist_version("nvidia-cuda-nvcc"):
        return None
    try:
        files = md.files("nvidia-cuda-nvcc") or []
    except Exception as exc:  # noqa: BLE001 - broken metadata: treated as absent
        log.info("nvidia-cuda-nvcc: unreadable file list (%s)", exc)
        return None
    for f in files:
        if f.name in ("nvcc", "nvcc.exe"):
            return str(f.locate())
    return None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def nvcc_probe(cuda_home: str | None) -> tuple[str | None, str | None, str]:
    """(version, path, source) of the nvcc a JIT would use: CUDA_HOME/bin/nvcc, PATH, then pip's
    nvidia-cuda-nvcc; source is "toolkit", "pip" (the nvcc is pip's, wherever it was found) or "none"."""
    version, path = nvcc_version(cuda_home)
    pip_path = pip_nvcc()
    if path:
        return version, path, "pip" if pip_path and _same_file(path, pip_path) else "toolkit"
    if pip_path and os.path.exists(pip_path):
        out = _run([pip_path, "--version"])
        m = re.search(r"release ([\d.]+)", out or "")
        return (m.group(1) if m else None), pip_path, "pip"
    return None, None, "none"


def tilelang_jit_nvcc(nvcc_source: str) -> str | None:
    """The nvcc TileLang's JIT compiles with, where it is not the one nvcc_probe found (Environment.jit_nvcc_source).

    tilelang 0.1.15 (tilelang/env.py _find_cuda_home, tilelang/contrib/nvcc.py get_nvcc_compiler) takes CUDA_HOME or
    CUDA_PATH as given, unchecked, and compiles with $CUDA_HOME/bin/nvcc; fla-core 0.6.0's has_usable_nvcc also
    counts nvcc on PATH. So CUDA_HOME naming a folder without bin/nvcc makes fla pick TileLang and its JIT fail."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if not home:
        return None
    path = os.path.join(home, "bin", "nvcc")
    if not os.path.exists(path):
        return "cuda-home-no-nvcc"
    pip_path = pip_nvcc()
    source = "pip" if pip_path and _same_file(path, pip_path) else "toolkit"
    return None if source == nvcc_source else source


def _cuda_home() -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    nvcc = shutil.which("nvcc")
    if nvcc:
        home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        # /usr/local/bin/nvcc may be a wrapper script: a CUDA home has the runtime headers
        if os.path.exists(os.path.join(home, "include", "cuda_runtime.h")) or not os.path.isdir("/usr/local/cuda"):
            return home
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else None


def absent_state(info: matrix.PackageInfo) -> PackageState | None:
    """The state of a package that is not installed (found without importing anything), or None when it is
    installed and only importing it can tell the rest (probe_package)."""
    if any(dist_version(d) for d in info.distributions) or _safe_find(info.name):
        return None
    return PackageState(info.name, installed=False, version=None, distribution=None, imports=False, error=None)


def probe_package(info: matrix.PackageInfo) -> PackageState:
    """Version and import state of one kernel package; the real exception is kept."""
    version = dist = None
    for d in info.distributions:
        v = dist_version(d)
        if v:
            version, dist = v, d
            break
    spec = importlib.util.find_spec(info.name) if _safe_find(info.name) else None
    if spec is None and version is None:
        return PackageState(info.name, installed=False, version=None, distribution=None, imports=False, error=None)
    location = (spec.origin if spec else None) or None
    error = None
    ext_path = None
    for mod in info.probe_modules:
        try:
            with warnings.catch_warnings(), signals.held(second_interrupts=True):
                warnings.simplefilter("ignore")
                m = importlib.import_module(mod)
            if info.extension and mod == info.extension:
                ext_path = getattr(m, "__file__", None)
        except KeyboardInterrupt:  # Ctrl-C / SIGTERM while importing: the command stops (an interrupted
            raise  # import is not "the package does not import", which install would act on)
        except BaseException as exc:  # noqa: BLE001 - any failure is the finding (SystemExit too)
            error = f"{type(exc).__name__}: {exc}".strip()
            break
    if info.extension and ext_path is None and error is None:
        s = importlib.util.find_spec(info.extension) if _safe_find(info.extension) else None
        ext_path = s.origin if s else None
    return PackageState(
        info.name, installed=True, version=version, distribution=dist, imports=error is None,
        error=error, location=location, extension_path=ext_path,
    )


def _safe_find(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_ENV_VARS = ("USE_HUB_KERNELS", "HF_HUB_OFFLINE", "LOCAL_KERNELS", "TRITON_CACHE_DIR", "CUDA_VISIBLE_DEVICES",
             "TORCH_CUDA_ARCH_LIST", "MAX_JOBS")  # then each package's {env_prefix}_FORCE_BUILD (packages.toml)
_ENV_VARS_AFTER = ("KERNELCHECK_HOME", "CUDA_HOME", "CUDA_PATH")  # and every FLA_* variable (fla's backend
# switches: integrations/fla_dispatch.py)


def _env_var_names(m: matrix.Matrix) -> tuple[str, ...]:
    """The variables the probe records: a build's switches, and each package's FORCE_BUILD (CAUSAL_CONV1D_...)."""
    builds = tuple(f"{p.env_prefix}_FORCE_BUILD" for p in m.packages.values() if p.env_prefix)
    return (*_ENV_VARS, *builds, *_ENV_VARS_AFTER)
# Variables that change which kernel runs without any package change (fla's FLA_*, transformers' TRANSFORMERS_*,
# the Kernel Hub switches): doctor's dispatch-env finding names them, a fleet compares them across ranks.
DISPATCH_PREFIXES = ("FLA_", "TRANSFORMERS_")
DISPATCH_NAMES = ("USE_HUB_KERNELS", "LOCAL_KERNELS")


def dispatch_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The dispatch variables set in `environ`, sorted by name."""
    return {k: environ[k] for k in sorted(environ) if k.startswith(DISPATCH_PREFIXES) or k in DISPATCH_NAMES}


def with_packages(env: Environment, *, m: matrix.Matrix) -> Environment:
    """`env` with every kernel package of the matrix `m` probed (imports them: call after binding checks)."""
    if env.packages:
        return env
    return replace(env, packages={n: probe_package(p) for n, p in m.packages.items()})


def _pick_gpus(gpu_override: tuple[Gpu, ...] | None, torch_info: TorchInfo | None,
               smi: tuple[tuple[Gpu, ...], str | None],
               driver: str | None) -> tuple[tuple[Gpu, ...], str, str | None]:
    """Choose the GPUs (override, then torch, then nvidia-smi), their source and the driver version."""
    gpus: tuple[Gpu, ...] = ()
    source = "none"
    if gpu_override is not None:
        gpus, source = gpu_override, "override"
    elif torch_info and torch_info.cuda_available:
        try:
            gpus, source = _gpus_from_torch(), "torch"
        except Exception as exc:  # noqa: BLE001 - a broken CUDA runtime raises many kinds of error
            log.info("torch could not list the GPUs (%s: %s); asking nvidia-smi", type(exc).__name__, exc)
            gpus = ()
    if not gpus and gpu_override is None:
        smi_gpus, smi_driver = smi
        if smi_gpus:
            gpus, source = smi_gpus, "nvidia-smi"
        driver = driver or smi_driver
    return gpus, source, driver


def probe(*, m: matrix.Matrix, packages: bool = True, gpu_override: tuple[Gpu, ...] | None = None,
          after_torch_import: Callable[[], None] | None = None) -> Environment:
    """Probe this machine for the packages of the matrix `m`. `gpu_override` stands in for GPUs that are not there
    (docker build stages). `after_torch_import` runs once torch imported, before any CUDA call and before this probe
    starts threads."""
    cuda_home = _cuda_home()
    # nvcc --version and nvidia-smi run while torch imports and queries CUDA (each waits on its own process, not
    # on the GIL); nvidia-smi's answer is used only when torch lists no GPU, as before.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # threads start at the first submit
        jobs: list[concurrent.futures.Future[Any] | None] = []

        def start_jobs() -> None:
            if not jobs:
                jobs.append(pool.submit(nvcc_probe, cuda_home))
                jobs.append(pool.submit(_nvidia_smi) if gpu_override is None else None)

        def after_import() -> None:
            if after_torch_import is not None:
                after_torch_import()
            start_jobs()

        if after_torch_import is None:
            start_jobs()
        torch_info = _probe_torch(after_import)
        start_jobs()
        nvcc_job, smi_job = jobs
        assert nvcc_job is not None
        nvcc, nvcc_path, nvcc_source = nvcc_job.result()
        smi = smi_job.result() if smi_job is not None else ((), None)
    gpus, source, driver = _pick_gpus(gpu_override, torch_info, smi, _driver_version())
    pkgs = {n: probe_package(p) for n, p in m.packages.items()} if packages else {}
    absent_names = {n for b in m.breakages for n in b.when.get("absent", ())}  # what rules' `absent` may ask
    present = {n: _safe_find(n) for n in sorted({"tilelang", "flash_qla", "flash_kda", *absent_names})}
    py = sys.version_info
    return Environment(
        python=platform.python_version(),
        python_tag=f"cp{py.major}{py.minor}",
        platform=f"{sys.platform}_{platform.machine()}",
        torch=torch_info,
        triton=dist_version("triton") or dist_version("pytorch-triton"),
        transformers=dist_version("transformers"),
        kernels=dist_version("kernels"),
        gpus=gpus,
        driver=driver,
        nvcc=nvcc,
        cuda_home=cuda_home,
        packages=pkgs,
        present=present,
        env_vars={**{k: os.environ[k] for k in _env_var_names(m) if k in os.environ},
                  **dispatch_variables(os.environ)},
        gpu_source=source,
        nvcc_source=nvcc_source,
        nvcc_path=nvcc_path,
        jit_nvcc_source=tilelang_jit_nvcc(nvcc_source),
        requirements_unmet=requirements_unmet(m),
    )
