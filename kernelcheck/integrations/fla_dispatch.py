"""fla's backend dispatch: which backend (Triton, TileLang, FlashQLA, FlashKDA) runs each op transformers binds.

The only module that knows fla's dispatch internals. fla-core >= 0.5 routes some ops through a backend registry
(`fla/backends.py` in 0.6, `fla/ops/backends` in 0.5; fla#998) and picks a backend at call time from the GPU, the
triton version, the FLA_* switches and what it finds installed; it logs the choice only at INFO. The op that
matters most is the gated `chunk_bwd_dqkwg` in chunk_gated_delta_rule's backward: Triton miscompiles it on Hopper
for 3.4.0 <= triton < 3.7.1, so fla raises there (fla#640) unless its TileLang backend takes the call, and TileLang
needs nvcc at run time for its JIT (fla#1026).

Two steps, as in the rest of kernelcheck: `layout()` reads how the installed fla dispatches from its own source
(feature detection; matrix/fla_dispatch.toml only for a version not installed here to read, and any source that
does not read as a known layout is a problem, reported as a finding, never a crash); `decide()` is pure: the
layout and an Environment value in, one `OpBackend` per op and pass out, each with its reason.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.util
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from kernelcheck.core.capability import Capability, sm_name
from kernelcheck.core.environment import Environment, dist_version

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

log = logging.getLogger(__name__)

BACKEND_NAMES = {"triton": "Triton", "tilelang": "TileLang", "flash_qla": "FlashQLA", "flash_kda": "FlashKDA"}
SWITCHES = ("FLA_TILELANG", "FLA_FLASH_QLA", "FLA_FLASH_KDA", "FLA_DISABLE_BACKEND_DISPATCH")


@dataclass(frozen=True)
class Layout:
    """How one fla release dispatches (the keys of matrix/fla_dispatch.toml)."""

    version: str | None
    origin: str  # source (read from the installed fla) | table (matrix/fla_dispatch.toml) | none (no fla) |
    # hub-cache (a Kernel Hub build's files in the HF cache) | hub-table (matrix/fla_dispatch.toml [[hub]]: its known
    # layout, not read here)
    dispatch: bool = False
    guard: str = ""  # triton specifier on which the Triton gated chunk_bwd_dqkwg raises on Hopper; "" = no guard
    bwd_tilelang: bool = False
    tilelang_check: str = ""  # import | find_spec+nvcc
    tilelang_default: str = ""  # hopper | always
    flash_qla: tuple[str, ...] = ()
    flash_qla_fwd_only: tuple[str, ...] = ()
    kda_tilelang: bool = False
    flash_kda: bool = False
    reference: str = ""
    problems: tuple[str, ...] = ()  # what the source reading expected and did not find
    assumed: str = ""  # hub-table: what the recorded layout assumes rather than knows

    @property
    def name(self) -> str:
        """How a sentence names this fla: "fla-core 0.6.0", or the Hub build "hub:kernels-community/fla@v3"."""
        return self.version or "fla" if self.origin.startswith("hub") else f"fla-core {self.version}"

    @property
    def known(self) -> bool:
        return self.origin in ("source", "table", "hub-cache", "hub-table") and not self.problems


@dataclass(frozen=True)
class OpBackend:
    """The backend one pass of one op will run on, and why."""

    function: str  # chunk_gated_delta_rule ...
    phase: str  # forward | backward
    backend: str  # triton | tilelang | flash_qla | flash_kda | unknown
    cause: str  # why this backend, or (TileLang/FlashQLA chosen) how it fails: a short key rules match
    outcome: str  # ok | raises-640 | wrong-grads-640 | jit-no-nvcc | jit-pip-nvcc | jit-cuda-home-no-nvcc |
    # tilelang-import-fails | unknown
    reason: str  # the same in words
    certain: bool = True

    @property
    def key(self) -> str:
        """What rules match (matrix/breakages.toml `fla_backend`): "function/phase backend:cause"."""
        return f"{self.function}/{self.phase} {self.backend}:{self.cause}"

    def to_json(self) -> dict[str, object]:
        return {"function": self.function, "pass": self.phase, "backend": self.backend,
                "backend_name": BACKEND_NAMES.get(self.backend, self.backend), "cause": self.cause,
                "outcome": self.outcome, "reason": self.reason, "certain": self.certain}


# -- reading the installed fla ------------------------------------------------------------------------
def _fla_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("fla")
    except (ImportError, ValueError):
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return Path(locs[0]) if locs else None


def _text(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text(encoding="utf-8", errors="replace")  # a damaged file: its layout is unknown
    except OSError:
        return None


_GUARD = re.compile(r"if g is not None and IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0"
                    r"(?: and not TRITON_ABOVE_(\d+)_(\d+)_(\d+))?:\s*\n\s*raise RuntimeError")


def _read_guard(chunk_o: str) -> str:
    m = _GUARD.search(chunk_o)
    if not m:
        return ""
    return ">=3.4.0" + (f",<{m.group(1)}.{m.group(2)}.{m.group(3)}" if m.group(1) else "")


def _read_tilelang(root: Path, registry: str) -> tuple[str, str, list[str]]:
    """(tilelang_check, tilelang_default, problems) of the TileLang chunk_bwd_dqkwg backend (`root`: the package)."""
    tl = _text(root, "ops/common/backends/tilelang/__init__.py") or ""
    if "def is_available" in tl:
        body = tl
    elif "class TileLangBackend" in registry:
        body = registry
    else:
        return "", "", ["no is_available for the TileLang backend (fla/ops/common/backends/tilelang, fla/backends.py)"]
    check = "find_spec+nvcc" if "has_usable_nvcc" in body else "import" if "import tilelang" in body else ""
    problems = [] if check else ["the TileLang backend's availability check is neither an import nor has_usable_nvcc"]
    default = "hopper" if "IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0" in tl else "always"
    return check, default, problems


def _read_flash_qla(root: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    qla = _text(root, "ops/gated_delta_rule/backends/flash_qla.py")
    registered = _text(root, "ops/gated_delta_rule/backends/__init__.py") or ""
    if not qla or "FlashQLABackend" not in registered:
        return (), ()
    caps = [c for flag, c in (("IS_NVIDIA_HOPPER", "9.*"), ("IS_NVIDIA_SM100", "10.*"), ("IS_NVIDIA_SM120", "12.0"))
            if flag in qla]
    fwd_only = ("12.0",) if "IS_NVIDIA_SM120 and _needs_backward" in qla else ()
    return tuple(caps), fwd_only


def read_source(root: Path, version: str | None) -> Layout:
    """The layout of the fla at `root` (the folder holding fla/), read from its source."""
    return read_package(root / "fla", version, "source", f"fla-core {version} source at {root / 'fla'}")


def read_package(root: Path, version: str | None, origin: str, label: str) -> Layout:
    """The layout of the fla package folder `root` (holding backends.py, ops/ ...): a pip install's `fla/` or a
    Kernel Hub build's package folder; `label` names it in the reference."""
    registry = _text(root, "backends.py") or _text(root, "ops/backends/__init__.py")
    chunk_o = _text(root, "ops/common/chunk_o.py")
    problems: list[str] = []
    if chunk_o is None or "def chunk_bwd_dqkwg(" not in chunk_o:
        problems.append("fla/ops/common/chunk_o.py has no chunk_bwd_dqkwg (the gated chunk backward)")
        chunk_o = chunk_o or ""
    dispatched = bool(re.search(r"@dispatch\('common'\)\s*\ndef chunk_bwd_dqkwg\(", chunk_o))
    if registry is None or not dispatched:  # no registry, or one that does not route the ops checked here (0.4)
        if dispatched:
            problems.append("chunk_bwd_dqkwg is dispatched but no backend registry was found")
        return Layout(version, origin, guard=_read_guard(chunk_o), problems=tuple(problems), reference=label)
    if "class BackendRegistry" not in registry or "FLA_DISABLE_BACKEND_DISPATCH" not in registry:
        problems.append("fla's backend registry has no BackendRegistry or no FLA_DISABLE_BACKEND_DISPATCH switch")
    tl_impl = "def chunk_bwd_dqkwg(" in (_text(root, "ops/common/backends/tilelang/__init__.py") or "")
    check, default, tl_problems = _read_tilelang(root, registry) if tl_impl else ("", "", [])
    problems.extend(tl_problems)
    qla, qla_fwd = _read_flash_qla(root)
    kda_tl = "def chunk_kda_bwd_wy_dqkg_fused(" in (_text(root, "ops/kda/backends/tilelang/__init__.py") or "")
    kda_dir = root / "ops/kda/backends"
    flash_kda = (kda_dir / "flash_kda.py").exists() or (kda_dir / "flashkda.py").exists()
    return Layout(version, origin, dispatch=True, guard=_read_guard(chunk_o), bwd_tilelang=tl_impl and dispatched,
                  tilelang_check=check, tilelang_default=default, flash_qla=qla, flash_qla_fwd_only=qla_fwd,
                  kda_tilelang=kda_tl, flash_kda=flash_kda, problems=tuple(problems),
                  reference=f"{label} (backends.py or ops/backends, ops/common/chunk_o.py, ops/*/backends)")


def from_table(version: str | None, *, m: Matrix) -> Layout:
    """The layout `m`'s fla_dispatch.toml gives for `version` (for an fla not installed here to read)."""
    if not version:
        return Layout(None, "none")
    for row in m.table("fla_dispatch.toml").get("layout", []):
        if _in(version, row["fla"]):
            return Layout(version, "table", dispatch=row["dispatch"], guard=row["guard"],
                          bwd_tilelang=row["bwd_tilelang"], tilelang_check=row["tilelang_check"],
                          tilelang_default=row["tilelang_default"], flash_qla=tuple(row["flash_qla"]),
                          flash_qla_fwd_only=tuple(row["flash_qla_fwd_only"]), kda_tilelang=row["kda_tilelang"],
                          flash_kda=row["flash_kda"], reference=row["reference"])
    return Layout(version, "table", problems=(f"matrix/fla_dispatch.toml has no row for fla-core {version}",))


def hub_package(build: Path) -> Path | None:
    """The fla package folder inside a Kernel Hub build variant folder: the variant folder itself (kernels'
    flat layout) or one folder below it; None when neither holds fla's ops."""
    if not build.is_dir():
        return None
    for cand in (build, *sorted(p for p in build.iterdir() if p.is_dir())):
        if (cand / "ops" / "common" / "chunk_o.py").is_file():
            return cand
    return None


def hub_layout(repo: str, version: int | None, build: Path | None, *, m: Matrix) -> Layout:
    """How a Kernel Hub fla build dispatches: read from its files when `build` (the variant folder in the cache or
    LOCAL_KERNELS) holds them (origin hub-cache); else the layout matrix/fla_dispatch.toml [[hub]] records for that
    repository and version (origin hub-table: not read here, `assumed` says what is not known)."""
    label = f"hub:{repo}@v{version}"
    pkg = hub_package(build) if build is not None else None
    if pkg is not None:
        return read_package(pkg, label, "hub-cache", f"{label} build files at {pkg}")
    for row in m.table("fla_dispatch.toml").get("hub", []):
        if row["repo"] == repo and row["version"] == version:
            return Layout(label, "hub-table", dispatch=row["dispatch"], guard=row["guard"],
                          bwd_tilelang=row["bwd_tilelang"], tilelang_check=row["tilelang_check"],
                          tilelang_default=row["tilelang_default"], flash_qla=tuple(row["flash_qla"]),
                          flash_qla_fwd_only=tuple(row["flash_qla_fwd_only"]), kda_tilelang=row["kda_tilelang"],
                          flash_kda=row["flash_kda"], reference=row["reference"], assumed=row.get("assumed", ""))
    return Layout(label, "hub-table", problems=(f"matrix/fla_dispatch.toml has no [[hub]] row for {label}",))


def hub_repos(*, m: Matrix) -> frozenset[str]:
    """The Hub repositories that are fla builds (`m`'s fla_dispatch.toml [[hub]])."""
    return frozenset(row["repo"] for row in m.table("fla_dispatch.toml").get("hub", []))


@functools.lru_cache(maxsize=8)
def _installed_layout(version: str) -> Layout | None:
    root = _fla_dir()
    if root is None or (dist_version("fla-core") or dist_version("flash-linear-attention")) != version:
        return None
    return read_source(root.parent, version)


def layout(env: Environment, *, m: Matrix) -> Layout:
    """How the fla of `env` dispatches: read from the installed source when `env`'s fla is the one installed
    here, else from the table (a planned or hypothetical version)."""
    st = env.packages.get("fla")
    version = st.version if st and st.installed else None
    if not version:
        return Layout(None, "none")
    return _installed_layout(version) or from_table(version, m=m)


# -- deciding ----------------------------------------------------------------------------------------
def _in(version: str | None, spec: str) -> bool:
    if not version or not spec:
        return False
    try:
        return SpecifierSet(spec).contains(Version(Version(version.split("+")[0]).base_version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


@dataclass(frozen=True)
class Machine:
    """What fla's dispatch reads at run time, taken from an Environment."""

    capability: Capability | None
    gpu_name: str
    triton: str | None
    switches: dict[str, str] = field(default_factory=dict)
    tilelang: bool = False  # tilelang found (find_spec)
    tilelang_imports: bool = True  # False: its apache-tvm-ffi is outside the window tilelang declares
    flash_qla: bool = False
    flash_kda: bool = False
    nvcc: str = "none"  # toolkit | pip | none: the nvcc fla's has_usable_nvcc finds
    jit_nvcc: str = ""  # the nvcc TileLang's JIT compiles with (Environment.jit_nvcc_source); "": the same as nvcc

    @classmethod
    def of(cls, env: Environment) -> Machine:
        gpu = env.gpus[0] if env.gpus else None
        unmet = env.requirements_unmet or ()
        return cls(gpu.capability if gpu else None, gpu.name if gpu else "", env.triton,
                   {k: v for k, v in env.env_vars.items() if k in SWITCHES},
                   bool(env.present.get("tilelang")), "tilelang:apache-tvm-ffi" not in unmet,
                   bool(env.present.get("flash_qla")), bool(env.present.get("flash_kda")), env.nvcc_source,
                   env.jit_nvcc_source or "")

    @property
    def hopper(self) -> bool:  # fla's IS_NVIDIA_HOPPER: capability 9.x (or a device named "NVIDIA H...": the same)
        return self.capability is not None and self.capability.major == 9

    def enabled(self, var: str, default: bool) -> bool:
        if var not in self.switches:
            return default
        return self.switches[var] != "0"


_JIT = {"none": ("jit-no-nvcc", "its JIT finds no nvcc (no CUDA toolkit here), so the first call fails to compile"),
        "pip": ("jit-pip-nvcc", "the only nvcc is pip's nvidia-cuda-nvcc, which is not a toolkit: measured on the "
                "H200, TileLang's JIT compile fails at the first call (RuntimeError: #if defined(_MSC_VER) ...), "
                "with and without CUDA_HOME pointing at it"),
        "cuda-home-no-nvcc": ("jit-cuda-home-no-nvcc", "CUDA_HOME (or CUDA_PATH) names a folder without bin/nvcc, and "
                              "TileLang's JIT compiles with $CUDA_HOME/bin/nvcc only (the nvcc on PATH, which fla "
                              "counted, is not used), so the first call fails to compile")}


def _tilelang_outcome(m: Machine) -> tuple[str, str]:
    if not m.tilelang_imports:
        return "tilelang-import-fails", ("apache-tvm-ffi is outside the window tilelang declares, so `import "
                                         "tilelang` fails inside the call")
    return _JIT.get(m.jit_nvcc or m.nvcc, ("ok", "nvcc from a CUDA toolkit is there for its JIT"))


def _why_no_tilelang(lay: Layout, m: Machine) -> tuple[str, str] | None:
    """Why fla does not pick TileLang for chunk_bwd_dqkwg (cause, words), or None when it does."""
    if not lay.dispatch or not lay.bwd_tilelang:
        return "no-tilelang-backend", f"{lay.name} has no TileLang backend for it"
    if m.switches.get("FLA_DISABLE_BACKEND_DISPATCH") == "1":
        return "dispatch-disabled", "FLA_DISABLE_BACKEND_DISPATCH=1 bypasses fla's backend dispatch"
    on_by_default = lay.tilelang_default == "always" or (m.hopper and _in(m.triton, ">=3.4.0"))
    if not m.enabled("FLA_TILELANG", on_by_default):
        if "FLA_TILELANG" in m.switches:
            return "tilelang-disabled", f"FLA_TILELANG={m.switches['FLA_TILELANG']} turns fla's TileLang backend off"
        return "not-default", "fla turns TileLang on for it only on Hopper with triton >= 3.4 (or FLA_TILELANG=1)"
    if not m.tilelang:
        return "tilelang-absent", "tilelang is not installed"
    if lay.tilelang_check == "import" and not m.tilelang_imports:
        return "tilelang-import-fails", "`import tilelang` fails (apache-tvm-ffi outside tilelang's window)"
    if lay.tilelang_check == "find_spec+nvcc" and m.nvcc == "none":
        return "no-nvcc", ("tilelang is installed but fla finds no nvcc for TileLang's JIT (not on PATH, not in "
                           "CUDA_HOME or /usr/local/cuda, no nvidia-cuda-nvcc; fla#1026)")
    return None


def _triton_bwd(lay: Layout, m: Machine, cause: str, why: str) -> OpBackend:
    fn = "chunk_gated_delta_rule"
    if m.hopper and lay.guard and _in(m.triton, lay.guard):
        return OpBackend(fn, "backward", "triton", cause, "raises-640",
                         f"{why}, so the Triton kernel runs, and on Hopper with triton {m.triton} fla raises "
                         "RuntimeError at the first backward (fla#640)")
    if m.hopper and not lay.guard and _in(m.triton, ">=3.4.0,<3.7.1"):
        return OpBackend(fn, "backward", "triton", cause, "wrong-grads-640",
                         f"{why}; the Triton kernel runs and on Hopper with triton {m.triton} returns wrong gradients "
                         "without an error (fla#640)")
    return OpBackend(fn, "backward", "triton", cause, "ok", f"{why}; the Triton kernel runs")


def _flash_qla(lay: Layout, m: Machine, fn: str) -> list[OpBackend] | None:
    cap = m.capability.dotted if m.capability else ""
    if not (lay.dispatch and lay.flash_qla and m.flash_qla and any(fnmatch.fnmatch(cap, c) for c in lay.flash_qla)):
        return None
    if m.switches.get("FLA_DISABLE_BACKEND_DISPATCH") == "1" or not m.enabled("FLA_FLASH_QLA", True):
        return None
    outcome, words = _tilelang_outcome(m)
    why = (f"flash_qla is installed and {sm_name(cap)} is one FlashQLA serves (its verifier also needs "
           "K = V = 128 and fp16/bf16, else the Triton path runs); FlashQLA is TileLang code: " + words)
    phases = ("forward",) if cap in lay.flash_qla_fwd_only else ("forward", "backward")
    cause = outcome if outcome != "ok" else "flash-qla"
    return [OpBackend(fn, p, "flash_qla", cause, outcome, why, certain=False) for p in phases]


def _gated_delta_rule(lay: Layout, m: Machine) -> list[OpBackend]:
    fn = "chunk_gated_delta_rule"
    qla = _flash_qla(lay, m, fn)
    if qla is not None and len(qla) == 2:
        return qla
    out = qla or [OpBackend(fn, "forward", "triton", "default", "ok", "fla's Triton kernels (no backend replaces "
                                                                       "the forward here)")]
    no = _why_no_tilelang(lay, m)
    if no is not None:
        return [*out, _triton_bwd(lay, m, *no)]
    outcome, words = _tilelang_outcome(m)
    why = ("fla's TileLang backend takes the gated chunk_bwd_dqkwg"
           + (" (on by default on Hopper with triton >= 3.4)" if "FLA_TILELANG" not in m.switches
              else f" (FLA_TILELANG={m.switches['FLA_TILELANG']})") + "; " + words)
    cause = outcome if outcome != "ok" else "default" if "FLA_TILELANG" not in m.switches else "forced"
    return [*out, OpBackend(fn, "backward", "tilelang", cause, outcome, why)]


def _kda(lay: Layout, m: Machine) -> list[OpBackend]:
    fn = "chunk_kda"
    fwd = OpBackend(fn, "forward", "triton", "default", "ok", "fla's Triton kernels")
    if lay.flash_kda and m.flash_kda and m.enabled("FLA_FLASH_KDA", True):
        fwd = OpBackend(fn, "forward", "flash_kda", "flash-kda", "ok", "flash_kda is installed: FlashKDA runs "
                        "chunk_kda's grad-free bf16 calls with K = V = 128 (inference); training runs Triton",
                        certain=False)
    usable = (lay.kda_tilelang and m.tilelang and m.enabled("FLA_TILELANG", True)
              and m.switches.get("FLA_DISABLE_BACKEND_DISPATCH") != "1"
              and (m.nvcc != "none" or lay.tilelang_check == "import")
              and (m.tilelang_imports or lay.tilelang_check != "import"))
    if not usable:
        return [fwd, OpBackend(fn, "backward", "triton", "default", "ok", "fla's Triton kernels (KDA's backward has "
                               "no fla#640 kernel); TileLang is not usable or not installed here")]
    outcome, words = _tilelang_outcome(m)
    return [fwd, OpBackend(fn, "backward", "tilelang", outcome if outcome != "ok" else "default", outcome,
                           "fla's TileLang backend takes chunk_kda_bwd_wy_dqkg_fused wherever TileLang is usable "
                           "(no GQA, no graph capture); " + words)]


def decide(lay: Layout, env: Environment, functions: tuple[str, ...]) -> list[OpBackend]:
    """The backend of each pass of each fla op in `functions` on `env`'s GPU (empty without a GPU or fla)."""
    m = Machine.of(env)
    if lay.origin == "none" or m.capability is None:
        return []
    if not lay.known:
        why = "fla's dispatch code does not read as any layout kernelcheck knows: " + "; ".join(lay.problems)
        return [OpBackend(fn, p, "unknown", "unknown-layout", "unknown", why, certain=False)
                for fn in functions if fn in ("chunk_gated_delta_rule", "chunk_kda") for p in ("forward", "backward")]
    out: list[OpBackend] = []
    for fn in functions:
        if fn == "chunk_gated_delta_rule":
            out.extend(_gated_delta_rule(lay, m))
        elif fn == "chunk_kda":
            out.extend(_kda(lay, m))
        elif fn in ("fused_recurrent_gated_delta_rule", "fused_recurrent_kda"):
            out.append(OpBackend(fn, "forward", "triton", "default", "ok",
                                 "no backend replaces it on NVIDIA GPUs: fla's Triton kernel"))
    return out


def backends(env: Environment, functions: tuple[str, ...], *, m: Matrix) -> list[OpBackend]:
    """The backend of each op and pass of `functions` in `env`: what core/rules.Facts is given as `fla_dispatch`
    (bound to the matrix: `functools.partial(backends, m=m)`)."""
    return decide(layout(env, m=m), env, functions)


# -- torch.compile ------------------------------------------------------------------------------------------------
_FLA_OPS = {"chunk_gated_delta_rule": "gated_delta_rule", "fused_recurrent_gated_delta_rule": "gated_delta_rule",
            "chunk_kda": "kda", "fused_recurrent_kda": "kda"}


@dataclass(frozen=True)
class CompileWrap:
    """Which of the ops transformers binds the installed fla wraps in torch.compiler.disable (each call is a graph
    break under torch.compile: Dynamo does not trace into such a function), how (`kinds`: fn -> `decorator`, its
    own @torch.compiler.disable, and/or `dispatch`, its backend dispatch's torch.compiler.disable(wrapper)), and
    whether FLA_DISABLE_BACKEND_DISPATCH=1 removes every wrapper (only where the dispatch is the only one)."""

    functions: tuple[str, ...]
    switch: bool  # FLA_DISABLE_BACKEND_DISPATCH=1 returns the op unwrapped
    reference: str
    kinds: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (fn, how it is wrapped), in `functions` order
    in_graph: tuple[tuple[str, str], ...] = ()  # (fn, custom_op | allow_in_graph): ops Dynamo keeps in the graph


# How an op can be wrapped, read off the decorators stacked on its `def` (feature detection, no version table).
_DISABLE_RX = re.compile(r"@torch\.(?:compiler|_dynamo)\.disable\b")
_IN_GRAPH = (("custom_op", re.compile(r"@(?:torch\.library\.)?(?:custom_op|triton_op)\(")),
             ("allow_in_graph", re.compile(r"@torch\.(?:compiler|_dynamo)\.allow_in_graph\b")))


def _decorators(text: str, fn: str) -> list[str] | None:
    """The decorator lines stacked on `def fn(` in `text` (None: no such def)."""
    m = re.search(r"((?:^@.*\n(?:[ )].*\n)*)*)^def " + re.escape(fn) + r"\(", text, re.M)
    return None if m is None else [x for x in m.group(1).splitlines() if x.startswith("@")]


def op_wrapping(fn: str, root: Path, dispatch_disables: bool) -> tuple[str, ...] | str | None:
    """How the op `fn` of the fla at `root` is wrapped: the disable kinds (`decorator`, `dispatch`), or the name
    of what keeps it in the graph (custom_op, allow_in_graph), or None (not found, or not wrapped)."""
    sub = _FLA_OPS.get(fn)
    folder = root / "ops" / sub if sub else None
    if folder is None or not folder.is_dir():
        return None
    for p in sorted(folder.glob("*.py")):
        decos = _decorators(p.read_text(encoding="utf-8", errors="replace"), fn)
        if decos is None:
            continue
        for name, rx in _IN_GRAPH:
            if any(rx.match(d) for d in decos):
                return name
        kinds = (("decorator",) if any(_DISABLE_RX.match(d) for d in decos) else ()) + (
            ("dispatch",) if dispatch_disables and any(d.startswith("@dispatch(") for d in decos) else ())
        return kinds or None
    return None


def compile_wrap(functions: tuple[str, ...], root: Path | None = None) -> CompileWrap | None:
    """Read from the installed fla's source (`root`: its package folder; default the installed one): None without
    fla or when none of `functions` is wrapped in torch.compiler.disable."""
    root = root or (_fla_dir())
    if root is None:
        return None
    registry = _text(root, "backends.py") or ""
    dispatch_disables = "torch.compiler.disable(wrapper)" in registry
    kinds: list[tuple[str, tuple[str, ...]]] = []
    in_graph: list[tuple[str, str]] = []
    for fn in functions:
        got = op_wrapping(fn, root, dispatch_disables)
        if isinstance(got, str):
            in_graph.append((fn, got))
        elif got:
            kinds.append((fn, got))
    if not kinds:
        return None
    switch = "_DISPATCH_DISABLED" in registry and "return default_function" in registry and all(
        k == ("dispatch",) for _, k in kinds)
    said = " and ".join({"decorator": "@torch.compiler.disable on the op", "dispatch": "backends.py BackendRegistry"
                         ".dispatch returns torch.compiler.disable(wrapper)"}[k] for k in sorted({
                             k for _, ks in kinds for k in ks}))
    return CompileWrap(tuple(f for f, _ in kinds), switch, f"fla source at {root}: {said}", tuple(kinds),
                       tuple(in_graph))
