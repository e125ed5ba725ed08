"""The JIT proof: `doctor --jit-probe` (and every verify) compiles and runs one trivial kernel with each JIT compiler
the implementation that runs will use (Triton, TileLang, FlashQLA's TileLang), in a child process with a time limit.

A JIT that is present is not one that works: pip's nvidia-cuda-nvcc makes fla's `has_usable_nvcc` true while
TileLang's first compile fails (measured on the H200), FlashQLA checks for no nvcc at all, an unwritable cache folder
or a C compiler that is missing stops Triton at the first call. So READY needs the probe to pass: each failure is a
broken finding with its fix and breaks the functions that use that JIT (core/decide.py, as a rule hit).

- Which JITs: the backend fla's dispatch picks for each op and pass (report.backends, from doctor/backends.py or the
  Hub fla build: doctor/provider.py); Triton for every op on Triton, TileLang and FlashQLA where they are picked.
- Runtime preconditions read here, in this process (`preconditions`, pure over a `Toolchain` and the environment):
  the cache folders the JITs write (TRITON_CACHE_DIR, TILELANG_CACHE_DIR / TILELANG_TMP_DIR, HOME), the C compiler
  Triton builds its launcher with, CUDA_VISIBLE_DEVICES hiding the GPUs this machine has, TRITON_INTERPRET.
- The probe (doctor/jit_child.py): with a GPU visible, compile + launch + compare; without one, what can be checked
  without a GPU - TileLang: its nvcc compiles a trivial .cu that includes the CUDA runtime and CCCL headers (what
  TileLang's generated code includes), Triton: a compile for the GPU's target - and the finding says the run is
  unchecked.
- Cached like doctor's import proofs (doctor/proofcache.py): a pass is stored under a key of the toolchain's identity
  (the JIT, the nvcc and its file, CUDA home and include folders, the JIT packages' versions and RECORDs, the
  variables a JIT reads, the driver and device nodes, the GPU arch) in $KERNELCHECK_HOME/jit-proofs/; a failure is
  probed again every time. The key leaves out what cannot change a probe's answer, as the import proofs' does (the
  host name, HOME's path, KERNELCHECK_HOME: proofcache.py's docstring says why); the cache folders the JITs write are
  in it as resolved (`Toolchain.caches`), so a HOME that decides them still counts.
- Proofs made when the image was built: `kernelcheck warm` probes under the variables `warm --print-env` prints and
  stores the passes in DIR/kernelcheck/jit-proofs; with KERNELCHECK_PROOF_DIR=DIR/kernelcheck a key found there
  (read only, after KERNELCHECK_HOME) is a pass "proven at bake time (when), not on this node"; a key that differs
  is probed here. `use_cache` False (doctor --no-cache) probes afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcheck.core import decide, settings
from kernelcheck.core.status import Finding, Severity
from kernelcheck.doctor import proofdirs
from kernelcheck.report.model import Report

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

JITS = ("triton", "tilelang", "flash_qla")
NAMES = {"triton": "Triton", "tilelang": "TileLang", "flash_qla": "FlashQLA's TileLang"}
TIMEOUT_S = 180.0  # one probe: a cold TileLang compile takes seconds to a minute
_TOOL_DISTS = ("torch", "triton", "tilelang", "flash-qla", "apache-tvm-ffi", "nvidia-cuda-nvcc", "nvidia-cuda-cccl",
               "nvidia-cuda-runtime", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-runtime-cu12")
FORMAT = 1


@dataclass(frozen=True)
class Toolchain:
    """What the JIT compilers find here, read the way they read it."""

    cuda_home: str | None  # the CUDA home TileLang takes (CUDA_HOME / CUDA_PATH as given, else from nvcc on PATH)
    cuda_home_from: str  # CUDA_HOME | CUDA_PATH | PATH | /usr/local/cuda | pip | none
    nvcc: str | None  # the nvcc TileLang compiles with ($CUDA_HOME/bin/nvcc)
    includes: tuple[str, ...]  # include folders TileLang passes (-I)
    cc: str | None  # the C compiler Triton builds its launcher with
    caches: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # jit -> ((what, folder), ...)
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES
    device_nodes: int = 0  # /dev/nvidia0, /dev/nvidia1 ...

    def to_json(self) -> dict[str, Any]:
        return {"cuda_home": self.cuda_home, "cuda_home_from": self.cuda_home_from, "nvcc": self.nvcc,
                "includes": list(self.includes), "cc": self.cc,
                "caches": {k: [list(p) for p in v] for k, v in self.caches.items()},
                "visible_devices": self.visible_devices, "device_nodes": self.device_nodes}


def _pip_cuda_home() -> str | None:
    """pip's CUDA compiler (nvidia-cuda-nvcc: site-packages/nvidia/cu13 or nvidia/cuda_nvcc), where installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cu12", "cuda_nvcc"):
            if (Path(loc) / sub / "bin" / "nvcc").is_file():
                return str(Path(loc) / sub)
    return None


def _cuda_home(environ: dict[str, str]) -> tuple[str | None, str]:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            return environ[var], var  # taken as given (tilelang/env.py _find_cuda_home)
    nvcc = shutil.which("nvcc", path=environ.get("PATH", ""))
    if nvcc:
        real = os.path.realpath(nvcc)
        return str(Path(real).parent.parent), "PATH"
    if os.path.isdir("/usr/local/cuda"):
        return "/usr/local/cuda", "/usr/local/cuda"
    pip = _pip_cuda_home()
    return (pip, "pip") if pip else (None, "none")


def _home(environ: dict[str, str]) -> str:
    return environ.get("HOME") or os.path.expanduser("~")


def toolchain(environ: dict[str, str]) -> Toolchain:
    """The toolchain the JITs find with `environ` on this machine."""
    home, how = _cuda_home(environ)
    nvcc = str(Path(home) / "bin" / "nvcc") if home else None
    includes = tuple(str(p) for p in (Path(home) / "include",) if home and p.is_dir()) if home else ()
    cc = environ.get("CC") or next((shutil.which(c, path=environ.get("PATH", "")) for c in ("cc", "gcc", "clang")
                                    if shutil.which(c, path=environ.get("PATH", ""))), None)
    h = _home(environ)
    triton_home = environ.get("TRITON_HOME") or h
    caches = {
        "triton": (("TRITON_CACHE_DIR", environ.get("TRITON_CACHE_DIR") or os.path.join(triton_home, ".triton",
                                                                                          "cache")),),
        "tilelang": (("TILELANG_CACHE_DIR", environ.get("TILELANG_CACHE_DIR") or os.path.join(h, ".tilelang",
                                                                                               "cache")),
                     *((("TILELANG_TMP_DIR", environ["TILELANG_TMP_DIR"]),) if environ.get("TILELANG_TMP_DIR")
                       else ())),
    }
    caches["flash_qla"] = caches["tilelang"]
    try:
        nodes = sum(1 for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        nodes = 0
    return Toolchain(home, how, nvcc, includes, cc, caches, environ.get("CUDA_VISIBLE_DEVICES"), nodes)


def wanted(report: Report) -> dict[str, tuple[str, ...]]:
    """{jit: the functions whose chosen implementation compiles with it}, from the backends of the fla that runs."""
    out: dict[str, list[str]] = {}
    for op in report.backends.ops if report.backends is not None else ():
        if op.backend in JITS and op.function not in out.setdefault(op.backend, []):
            out[op.backend].append(op.function)
    return {j: tuple(out[j]) for j in JITS if out.get(j)}


def _writable(folder: str) -> bool:
    """Whether `folder` can be written (created where it does not exist yet)."""
    p = Path(folder)
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def preconditions(jits: dict[str, tuple[str, ...]], tc: Toolchain, environ: dict[str, str],
                  writable: Any = _writable) -> list[Finding]:
    """The runtime preconditions of the JITs in `jits` that are broken (pure but for `writable`)."""
    out: list[Finding] = []
    for jit, fns in jits.items():
        for what, folder in tc.caches.get(jit, ()):
            if not writable(folder):
                out.append(Finding(
                    "jit-precondition", Severity.BROKEN,
                    f"{NAMES[jit]} writes its compiled kernels to {folder} ({what}"
                    f"{'' if what in environ else ', its default'}), which this process cannot write: the first "
                    "call fails.", f"export {what}=/tmp/{jit.replace('_', '-')}-cache  (any writable folder)",
                    "triton/runtime/cache.py (TRITON_CACHE_DIR, ~/.triton/cache); tilelang/env.py "
                    "(TILELANG_CACHE_DIR, ~/.tilelang/cache)", fns))
    if "triton" in jits and not tc.cc:
        out.append(Finding(
            "jit-precondition", Severity.BROKEN,
            "Triton builds its kernel launcher with a C compiler at the first call (CC, or cc/gcc/clang on PATH), "
            "and there is none here: the first fla call fails.",
            "install a C compiler in the runtime image (e.g. apt-get install gcc), or set CC",
            "triton/runtime/build.py (_build: CC, then cc/gcc/clang)", jits["triton"]))
    hidden = tc.visible_devices is not None and tc.visible_devices.strip() in ("", "-1", "none", "NoDevFiles")
    if jits and hidden and tc.device_nodes:
        fns = tuple(dict.fromkeys(f for v in jits.values() for f in v))
        out.append(Finding(
            "jit-precondition", Severity.BROKEN,
            f"CUDA_VISIBLE_DEVICES={tc.visible_devices!r} hides the {tc.device_nodes} GPU(s) of this machine from "
            "the process: no kernel can run on them, and the JIT run could not be checked.",
            "unset CUDA_VISIBLE_DEVICES, or set it to the GPUs the job should use (e.g. 0)",
            "CUDA runtime: CUDA_VISIBLE_DEVICES", fns))
    if "triton" in jits and environ.get("TRITON_INTERPRET", "").strip().upper() in settings.YES:
        out.append(Finding(
            "jit-precondition", Severity.FALLBACK,
            f"TRITON_INTERPRET={environ['TRITON_INTERPRET']}: Triton runs every kernel in its Python interpreter "
            "instead of compiling it, orders of magnitude slower.", "unset TRITON_INTERPRET for the job",
            "triton/runtime/interpreter.py", jits["triton"]))
    return out


# -- the probe and its cache ----------------------------------------------------------------------------------------
def _key(jit: str, mode: str, arch: str, tc: Toolchain, m: Matrix) -> str:
    from kernelcheck.doctor import proofcache

    dists = {}
    for name in _TOOL_DISTS:
        d = proofcache._find_dist(name)
        dists[name] = None if d is None else proofcache._dist_entry(d, False)
    ident = {"format": FORMAT, "jit": jit, "mode": mode, "arch": arch, "toolchain": tc.to_json(),
             "nvcc": proofcache._stat(tc.nvcc) if tc.nvcc else None,
             "nvcc_real": proofcache._stat(os.path.realpath(tc.nvcc)) if tc.nvcc else None,
             "python": sys.executable, "dists": dists, "environ": proofcache._environ(m),
             "home": proofcache._home(), "machine": proofcache._machine()}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:32]


SUBFOLDER = "jit-proofs"


def folder() -> Path:
    return proofdirs.home(SUBFOLDER)


def baked_folder() -> Path | None:
    """KERNELCHECK_PROOF_DIR/jit-proofs: passes made when the image was built (read only), or None."""
    return proofdirs.baked(SUBFOLDER)


def _read(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key and data.get("ok") is True else None


def _cached(key: str) -> dict[str, Any] | None:
    """A pass stored for `key`: KERNELCHECK_HOME's, else one baked into KERNELCHECK_PROOF_DIR (`baked` True)."""
    return proofdirs.lookup(SUBFOLDER, key, _read)


def _store(key: str, result: dict[str, Any]) -> None:
    try:
        folder().mkdir(parents=True, exist_ok=True)
        tmp = folder() / f".{key}.{os.getpid()}"
        tmp.write_text(json.dumps({**result, "key": key,
                                   "proven_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        os.replace(tmp, folder() / f"{key}.json")
    except OSError:
        pass  # unwritable: probed again next time


def run_probe(jit: str, mode: str, arch: str, tc: Toolchain, timeout: float = TIMEOUT_S,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """One probe in a child process (doctor/jit_child.py): {"ok", "stage", "error", "seconds"}. `env`: the child's
    environment (warm: the JIT caches pointed into its folder, so verify's own probe finds its kernel there)."""
    child = Path(__file__).with_name("jit_child.py")
    cmd = [sys.executable, str(child), jit, mode, arch, tc.nvcc or "-", *tc.includes]
    t0 = time.monotonic()
    from kernelcheck.core import child as children

    # the probe's temporary files (kc-jit-*) under a folder of this process's: removed even when the probe's
    # tree is ended (a hanging nvcc), which cannot clean up after itself
    with tempfile.TemporaryDirectory(prefix="kc-jitprobe-") as tmp:
        res = children.run(cmd, timeout, env={**(env if env is not None else os.environ), "TMPDIR": tmp})
    if res.ended == "timeout":
        return {"ok": False, "stage": mode, "error": f"timed out after {timeout:.0f} s", "seconds": timeout,
                "timed_out": True}
    lines = [x for x in res.output.splitlines() if x.startswith("{")]
    if res.code != 0 or not lines:
        tail = res.output.strip().splitlines()[-5:]
        what = f"exited {res.code}" if not res.ended else f"wrote over {children.LIMIT >> 20} MiB and was ended"
        return {"ok": False, "stage": mode, "error": f"the probe process {what}: " + " | ".join(tail),
                "seconds": round(time.monotonic() - t0, 2)}
    try:
        return dict(json.loads(lines[-1]))
    except ValueError:
        return {"ok": False, "stage": mode, "error": f"the probe process printed no answer: {lines[-1][:200]}",
                "seconds": round(time.monotonic() - t0, 2)}


def probe(jit: str, mode: str, arch: str, tc: Toolchain, use_cache: bool = True,
          timeout: float = TIMEOUT_S, *, m: Matrix) -> dict[str, Any]:
    """A probe's result, from the cache when this toolchain passed before (`cached` says when; its key holds the
    environment variables the matrix `m` names)."""
    key = _key(jit, mode, arch, tc, m)
    if use_cache:
        hit = _cached(key)
        if hit is not None:
            return {**hit, "cached": hit.get("proven_at") or "?"}
    out = run_probe(jit, mode, arch, tc, timeout)
    if out.get("ok") and use_cache:
        _store(key, out)
    return {**out, "cached": None}


# -- findings ------------------------------------------------------------------------------------------------------
# What each piece of pip's CUDA compiler brings, found missing by the error it gives (measured here with nvcc 13.0.88
# from pip: nvcc alone and nvcc + cccl (tilelang[nvcc]) miss cuda_runtime.h; + nvidia-cuda-runtime misses
# crt/host_config.h; + nvidia-cuda-crt misses nvvm/bin/cicc; without nvidia-cuda-cccl, cuda/std/...; all five compile).
_PIECES = (("cuda/std/", "nvidia-cuda-cccl"), ("crt/host_config.h", "nvidia-cuda-crt"), ("cicc", "nvidia-nvvm"),
           ("cuda_runtime.h", "nvidia-cuda-runtime"))


def missing_piece(error: str) -> str | None:
    """The pip distribution whose file a failed nvcc compile names (None: not one of them)."""
    return next((dist for needle, dist in _PIECES if needle in (error or "")), None)


def _fix(jit: str, error: str) -> str:
    e = error or ""
    piece = missing_piece(e)
    if "timed out" in e:
        return (f"run kernelcheck doctor --jit-probe again (a cold compile can be slow); if it hangs, check "
                f"{NAMES[jit]}'s cache folder and the nvcc it uses")
    if piece or "_MSC_VER" in e:
        return ("put the CUDA toolkit in the runtime image (a -devel base image: nvcc with its headers and nvvm), or "
                f"pip install {piece or 'nvidia-cuda-runtime'} for the same CUDA minor as nvidia-cuda-nvcc: pip's nvcc "
                "alone lacks nvidia-cuda-runtime, nvidia-cuda-crt, nvidia-nvvm and nvidia-cuda-cccl, each of which "
                "TileLang's compile needs (tilelang[nvcc] brings only nvcc and cccl)")
    if "no nvcc" in e or ("No such file or directory" in e and "nvcc" in e):
        return ("put the CUDA toolkit in the runtime image (nvcc on PATH or in CUDA_HOME), or unset a CUDA_HOME "
                "without bin/nvcc")
    if e.startswith(("ImportError", "ModuleNotFoundError")):
        return f"reinstall the package {NAMES[jit]} comes from (and what it requires), then run the probe again"
    return "the error above is the JIT's own; fix it, or turn the backend off (FLA_TILELANG=0 / FLA_FLASH_QLA=0)"


def findings(jits: dict[str, tuple[str, ...]], results: dict[str, dict[str, Any]], tc: Toolchain,
             arch: str) -> list[Finding]:
    """The findings for the probe results (pure: fast tests give results)."""
    out: list[Finding] = []
    for jit, fns in jits.items():
        r = results.get(jit)
        if r is None:
            continue
        name = NAMES[jit]
        where = f"with {tc.nvcc} (CUDA home from {tc.cuda_home_from})" if jit != "triton" else ""
        baked = bool(r.get("cached") and r.get("baked"))
        cached = ("" if not r.get("cached") else
                  f"; proven at bake time ({r['cached']}), not on this node, under this node's toolchain key"
                  if baked else f"; passed before with this toolchain ({r['cached']})")
        if not r.get("ok") and r.get("stage") == "probe":  # nvcc works; the probe's own kernel did not run
            out.append(Finding(
                "jit-run-unchecked", Severity.WARNING,
                f"{name}'s nvcc compiles the CUDA runtime and CCCL headers here, but the probe's trivial kernel did "
                f"not run ({r.get('error')}): the probe cannot tell its own kernel from the JIT, so the run is "
                "unchecked.", "run verify on this machine (it runs the real kernels)", None, fns))
        elif not r.get("ok"):
            out.append(Finding(
                "jit-probe-failed", Severity.BROKEN,
                f"{name} could not {'compile' if r.get('stage') in ('compile', 'import') else 'run'} a trivial kernel "
                f"here for {arch} {where}: {r.get('error')}. The functions that use it fail at their first call.",
                _fix(jit, str(r.get("error") or "")), "doctor --jit-probe (kernelcheck/doctor/jit_child.py)", fns))
        elif r.get("stage") == "run":
            out.append(Finding("jit-probe-passed", Severity.INFO,
                               f"{name} compiled and ran a trivial kernel {'' if baked else 'here '}in "
                               f"{r.get('seconds')} s{cached}.", None, None, fns))
        else:
            what = ("its nvcc compiled a trivial .cu with the CUDA runtime and CCCL headers" if jit != "triton"
                    else f"it compiled a trivial kernel for {arch}")
            out.append(Finding(
                "jit-run-unchecked", Severity.WARNING,
                f"no GPU is visible to this process, so {name} was checked only as far as it goes without one: {what}"
                f"{cached}. Whether its kernels load and run on the GPU is unchecked.",
                "run kernelcheck doctor --jit-probe (or verify) on the GPU machine", None, fns))
    return out


def attach(report: Report, *, m: Matrix, use_cache: bool = True, timeout: float = TIMEOUT_S) -> None:
    """Probe each JIT the implementation that runs uses; add the findings and break the functions that fail. A GPU
    the probe found here (torch or nvidia-smi, not --arch) is where the kernel runs; else compile only."""
    jits = wanted(report)
    if not jits:
        return
    environ = dict(os.environ)
    tc = toolchain(environ)
    pre = preconditions(jits, tc, environ)
    view = report.environment
    gpus = view.gpus if view is not None else ()
    mode = "run" if gpus and view is not None and view.gpu_source in ("torch", "nvidia-smi") else "compile"
    arch = gpus[0].capability.sm if gpus else "sm_90"
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(jits)) as pool:  # one child each, at once: the time of the slowest
        futures = {jit: pool.submit(probe, jit, mode, arch, tc, use_cache, timeout, m=m)
                   for jit in jits}
        results = {jit: f.result() for jit, f in futures.items()}
    found = [*pre, *findings(jits, results, tc, arch)]
    report.findings.extend(found)
    hits = [decide.RuleEvidence(f.id, f.severity, f"the JIT check failed ({f.id})", f.message, f.fix, f.functions)
            for f in found if f.severity in (Severity.BROKEN, Severity.FALLBACK)]
    if hits:
        report.functions = [decide.decide(fs, rules=hits) for fs in report.functions]
