"""The JIT compilers' disk caches (Triton, TileLang, FlashQLA's TileLang, Inductor): where each one writes, what its
key is made of on this node, what a folder holds, and the time a run spends in each compiler.

Everything about another project's internals is read here, feature-detected: an installed Triton whose cache key
is computed elsewhere than where matrix/jit_caches.toml's reference says gives its JIT a `layout` note (the proof then
says it cannot decide), never an exception. The key parts (`read_keys`) are read in the process that will compile
(warm's child) or in a child process of the same environment (`keys_in_child`: the cache proof), so the checking
process imports no JIT.

    python -m kernelcheck.integrations.jit_caches [ARCH]    # this node's key parts, one JSON line
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck.core import lifeline

# the distributions whose kernel source is hashed into a Triton or TileLang key: their versions stand for it
SOURCE_DISTS = ("flash-linear-attention", "fla-core", "causal-conv1d", "mamba-ssm", "liger-kernel", "flash-qla")
KEYS_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Layout:
    """One JIT's cache as matrix/jit_caches.toml describes it."""

    jit: str
    title: str
    variables: tuple[tuple[str, str], ...]  # (variable, subfolder of the cache dir)
    key: tuple[str, ...]  # the key parts (names of [part])
    reference: str
    unstable: str = ""  # a reference when the key is not stable across processes (a hit must be measured)
    compile_only: bool = False  # only with --compile (Inductor)


def layouts(table: Mapping[str, Any]) -> dict[str, Layout]:
    """The JITs of jit_caches.toml, in its order."""
    return {name: Layout(name, d["title"], tuple((v[0], v[1]) for v in d["variables"]), tuple(d["key"]),
                         d["reference"], d.get("unstable", ""), bool(d.get("compile_only", False)))
            for name, d in table["jit"].items()}


# kernelcheck's own proofs (import, JIT probe: the gate's first steps), read only by the job (warm/proofs.py)
OWN = ("KERNELCHECK_PROOF_DIR", "kernelcheck")


def env_for(cache_dir: str, table: Mapping[str, Any], with_compile: bool, own: bool = True) -> dict[str, str]:
    """The variables that point every JIT at its subfolder of `cache_dir` (absolute), in the table's order, and
    (`own`) the folder of kernelcheck's own import and JIT-probe proofs (KERNELCHECK_PROOF_DIR)."""
    root = os.path.abspath(cache_dir)
    out: dict[str, str] = {}
    for lay in layouts(table).values():
        if lay.compile_only and not with_compile:
            continue
        for var, sub in lay.variables:
            out.setdefault(var, os.path.join(root, sub))
    if own:
        out[OWN[0]] = os.path.join(root, OWN[1])
    return out


def inventory(cache_dir: str, table: Mapping[str, Any], with_compile: bool = False) -> dict[str, dict[str, int]]:
    """{jit: {"entries", "bytes"}} of each JIT's subfolder: entries are the folder's top-level items (Triton: one
    folder per compiled kernel, with its autotune results), bytes all files below. A JIT that shares a folder with
    another (FlashQLA with TileLang) is counted once, under the first."""
    out: dict[str, dict[str, int]] = {}
    seen: set[str] = set()
    for lay in layouts(table).values():
        var, sub = lay.variables[0]
        if sub in seen or (lay.compile_only and not with_compile):
            continue
        seen.add(sub)
        folder = Path(cache_dir) / sub
        out[lay.jit] = {"entries": _entries(folder), "bytes": _bytes(folder)}
    return out


def _entries(folder: Path) -> int:
    try:
        return sum(1 for p in folder.iterdir() if p.name != "tmp")
    except OSError:
        return 0


def _bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


# -- the key parts on this node ------------------------------------------------------------------------------------
def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - unreadable metadata: as absent
        return None


def driver_version() -> str | None:
    """The NVIDIA driver of this node (/proc, else nvidia-smi); None without one."""
    from kernelcheck.core import environment

    found = environment._driver_version()  # the probe's own reader
    if found:
        return found
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, preexec_fn=lifeline.preexec(), timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = res.stdout.strip().splitlines() if res.returncode == 0 else []
    return lines[0].strip() if lines else None


def _gpu(arch: str | None) -> tuple[str | None, str | None]:
    """(arch "sm_90", GPU name) from torch where a GPU is visible, else (`arch`, None)."""
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            return f"sm_{major}{minor}", str(torch.cuda.get_device_name(0))
    except Exception:  # noqa: BLE001 - no torch, or a broken one: the arch given
        pass
    return arch, None


def _triton_keys(arch: str | None) -> dict[str, Any]:
    """Triton's key parts: its own key (triton_key, hashed), the ptxas version backend.hash() uses, the
    cache-invalidating variables set. Feature-detected for the installed version."""
    try:
        import triton
    except Exception as exc:  # noqa: BLE001 - not installed, or its import fails: no Triton cache to prove
        return {"absent": f"{type(exc).__name__}: {str(exc)[:200]}"}
    out: dict[str, Any] = {"version": getattr(triton, "__version__", None)}
    key_fn = _first_attr(("triton.runtime.cache", "triton_key"), ("triton.compiler.compiler", "triton_key"))
    env_fn = _first_attr(("triton._C.libtriton", "get_cache_invalidating_env_vars"),
                         ("triton.runtime.cache", "get_cache_invalidating_env_vars"))
    ptxas_fn = _first_attr(("triton.backends.nvidia.compiler", "get_ptxas_version"))
    missing = [n for n, f in (("triton_key", key_fn), ("get_cache_invalidating_env_vars", env_fn),
                              ("get_ptxas_version", ptxas_fn)) if f is None]
    if missing:
        out["layout"] = (f"Triton {out['version']} has no {', '.join(missing)} where its cache key is computed "
                         "(triton/runtime/cache.py get_cache_key in 3.x)")
        return out
    assert key_fn is not None and env_fn is not None and ptxas_fn is not None
    try:
        out["triton"] = f"{out['version']}+{hashlib.sha256(str(key_fn()).encode()).hexdigest()[:16]}"
        out["triton_env"] = {str(k): str(v) for k, v in sorted(dict(env_fn()).items())}
    except Exception as exc:  # noqa: BLE001 - the layout moved under the same names
        out["layout"] = f"Triton {out['version']}'s triton_key() raised {type(exc).__name__}: {str(exc)[:200]}"
        return out
    number = int(arch.removeprefix("sm_").rstrip("a")) if arch and arch.removeprefix("sm_")[:2].isdigit() else 90
    try:
        text = str(ptxas_fn(number))
        out["ptxas"] = _release(text) or text.strip().splitlines()[-1][:80]
    except Exception as exc:  # noqa: BLE001 - no ptxas here (a CPU wheel without it): said, not guessed
        out["ptxas"] = None
        out["ptxas_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def _release(text: str) -> str | None:
    import re

    m = re.search(r"release ([\d.]+), V([\d.]+)", text)
    return m.group(2) if m else None


def _first_attr(*places: tuple[str, str]) -> Callable[..., Any] | None:
    import importlib

    for module, name in places:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except Exception:  # noqa: BLE001 - a module of another layout
            found = None
        if callable(found):
            return found  # type: ignore[no-any-return]
    return None


def _nvcc() -> str | None:
    from kernelcheck.core import environment

    try:
        return environment.nvcc_version(os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"))[0]
    except Exception:  # noqa: BLE001 - no nvcc: TileLang cannot compile; the JIT probe says so
        return None


def read_keys(arch: str | None = None) -> dict[str, Any]:
    """This node's key parts, per JIT, read in this process: {"node": {...}, "triton": {...}, "tilelang": ...}.
    A JIT that is not installed has {"absent": why}."""
    arch, gpu = _gpu(arch)
    sources = {d: v for d in SOURCE_DISTS if (v := _version(d))}
    node = {"arch": arch, "gpu": gpu, "driver": driver_version(), "python": sys.version.split()[0]}
    triton = _triton_keys(arch)
    keys: dict[str, Any] = {"node": node, "triton": {**triton, "arch": arch, "sources": sources}}
    tl = _version("tilelang")
    tl_parts = {"arch": arch, "tilelang": tl, "tvm_ffi": _version("apache-tvm-ffi"), "nvcc": _nvcc() if tl else None}
    keys["tilelang"] = {**tl_parts, "sources": sources} if tl else {"absent": "tilelang is not installed"}
    qla = _version("flash-qla")
    keys["flash_qla"] = {**tl_parts, "flash_qla": qla} if qla and tl else {"absent": "flash-qla is not installed"}
    torch_v = _version("torch")
    cuda = None
    try:
        import torch

        cuda = torch.version.cuda
    except Exception:  # noqa: BLE001
        pass
    keys["inductor"] = {"arch": arch, "torch": torch_v, "cuda": cuda, "gpu": gpu, "triton": triton.get("triton")}
    return keys


def keys_in_child(env: Mapping[str, str], arch: str | None, timeout: float = KEYS_TIMEOUT_S) -> dict[str, Any]:
    """`read_keys` in a child process with `env` (the job's environment: the cache variables pointed at the baked
    folder), so this process imports no JIT. {"error": why} where the child fails."""
    cmd = [sys.executable, "-m", "kernelcheck.integrations.jit_caches", *([arch] if arch else [])]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(env),
                             preexec_fn=lifeline.preexec())
    except subprocess.TimeoutExpired:
        return {"error": f"reading the key parts timed out after {timeout:.0f} s"}
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    lines = [x for x in res.stdout.splitlines() if x.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-3:])
        return {"error": f"reading the key parts exited {res.returncode}: {tail[:300]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


# -- time spent in each compiler -----------------------------------------------------------------------------------
@dataclass
class Timers:
    """Seconds and calls inside each JIT's compile entry point during a run (`hooked`: the entry points found)."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    hooked: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def add(self, what: str, dt: float) -> None:
        self.seconds[what] = self.seconds.get(what, 0.0) + dt
        self.calls[what] = self.calls.get(what, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        return {"seconds": {k: round(v, 3) for k, v in self.seconds.items()}, "calls": dict(self.calls)}


def _timed(fn: Callable[..., Any], timers: Timers, what: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timers.add(what, time.perf_counter() - t0)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def install_timers(jits: Iterable[str]) -> Timers:
    """Time each JIT's compile entry point in this process (warm's child only: the process that compiles for the
    image, never the user's): Triton's compile (a cache hit is a fast load) and its autotuner's benchmarks,
    TileLang's cached() (compile or load). An entry point not found is listed in `missing`, not guessed."""
    import importlib

    timers = Timers()
    wanted = set(jits)
    spots: list[tuple[str, str, str, str]] = []  # (jit, module, owner attr or "", function)
    if "triton" in wanted:
        spots += [("triton", "triton.compiler", "", "compile"), ("triton-autotune", "triton.runtime.autotuner",
                                                                  "Autotuner", "_bench")]
    if wanted & {"tilelang", "flash_qla"}:
        spots += [("tilelang", "tilelang.cache", "", "cached")]
    for jit, module, owner, name in spots:
        try:
            mod = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - not installed: nothing of it compiles
            continue
        target = getattr(mod, owner, None) if owner else mod
        fn = getattr(target, name, None) if target is not None else None
        if not callable(fn):
            timers.missing.append(f"{module}.{owner + '.' if owner else ''}{name}")
            continue
        setattr(target, name, _timed(fn, timers, jit))
        if module == "triton.compiler":  # jit.py imports it from the package; the module's own name too
            sub = importlib.import_module("triton.compiler.compiler")
            if getattr(sub, name, None) is fn:
                setattr(sub, name, getattr(target, name))
        timers.hooked.append(jit)
    return timers


# -- autotuning at a check's shape ----------------------------------------------------------------------------------
@contextmanager
def first_config_only(on: bool = True) -> Iterator[bool]:
    """While the block runs, each Triton autotuner in this process benchmarks its configs in order only until one
    compiles and launches, and takes that one: the other configs are neither compiled nor timed. For a check at a
    tiny shape (verify's gate, warm for it): which config is fastest there says nothing about the job's shapes, and
    compiling every config is most of a cold start. A config that fails (out of resources, a ptxas error: the
    autotuner's own infinite timing) moves on to the next. Yields whether it applies: Triton already imported (the
    kernels' packages import it), its Autotuner with the `_bench` of 3.x; else nothing is changed."""
    cls = None
    if on and "triton" in sys.modules:
        try:
            from triton.runtime import autotuner

            cls = getattr(autotuner, "Autotuner", None)
        except Exception:  # noqa: BLE001 - another layout: full autotuning, as without the check
            cls = None
    orig = getattr(cls, "_bench", None) if cls is not None else None
    if cls is None or not callable(orig):
        yield False
        return
    inf = float("inf")

    def _bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        nargs = getattr(self, "nargs", None)
        if nargs is not None and getattr(self, "_kernelcheck_round", None) is nargs:
            return [inf, inf, inf]  # this autotuning round has its config: the others are not compiled
        out = orig(self, *args, **kwargs)
        try:
            found = math.isfinite(float(out[0]))
        except (TypeError, ValueError, IndexError):
            found = True
        if found:
            self._kernelcheck_round = nargs
        return out

    cls._bench = _bench
    try:
        yield True
    finally:
        cls._bench = orig


def main(argv: list[str]) -> int:
    print(json.dumps(read_keys(argv[0] if argv else None), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
