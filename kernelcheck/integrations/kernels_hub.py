"""Hugging Face Kernel Hub: which Hub build `kernels` would load here, and pre-fetching it for offline jobs.

transformers can swap a layer's (or a fast function's) forward for a kernel from the Kernel Hub
(`use_kernels=True`, through the `kernels` package). When the Hub repository has no build for this
torch/CUDA, `kernelize` keeps the torch forward and logs it at INFO: the job is slow and nobody sees it.

This module answers, from the installed packages rather than from tables in kernelcheck:
- what transformers maps to the Hub (its own `_build_kernel_mapping`, read from its source so it works
  even when transformers considers the installed `kernels` out of its version window), the `kernels`
  window it accepts, `USE_HUB_KERNELS` and the `use_kernels` default of `from_pretrained`;
- which build variant `kernels` itself would choose for each repository (`kernels.variants`), with the
  reason every other variant was rejected, listed from `LOCAL_KERNELS`, the Hugging Face cache or the Hub;
- `prefetch`: download exactly the chosen variants into the cache and write a `kernels.lock` in kernels'
  own format (`KernelLocks`), so offline jobs load exactly those builds;
- `applied_kernels`: after loading/kernelizing, whether each Hub kernel really replaced the torch forward.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import platform
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelcheck.core import environment as environment_mod

_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "ON", "YES", "TRUE", "Y"}


# ---------------------------------------------------------------------------------------------------------------
# Plain data
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HubRepo:
    """One repository a transformers mapping points at."""

    repo_id: str
    layer_name: str
    version: int | None = None
    revision: str | None = None
    trust_remote_code: bool = False

    @property
    def spec(self) -> str:
        return f"{self.repo_id}@v{self.version}" if self.version is not None else f"{self.repo_id}@{self.revision}"


@dataclass(frozen=True)
class MappingEntry:
    """One (name, device, capability range, modes) -> repository line of transformers' Hub mapping."""

    name: str  # the mapping key: a layer name (RMSNormGated) or a function name (chunk_gated_delta_rule)
    device: str  # cuda | rocm | xpu | cpu | mps | npu ...
    modes: tuple[str, ...]  # ("TRAINING",), ("INFERENCE", "TORCH_COMPILE"), ("FALLBACK",)
    repo: HubRepo
    capability: tuple[int, int] | None = None  # (min, max) as kernels encodes it: 90 = sm_90


@dataclass(frozen=True)
class TransformersHub:
    """What the installed transformers says about Hub kernels."""

    transformers: str | None
    kernels: str | None
    window: tuple[str, str] | None  # (min inclusive, max exclusive)
    window_source: str
    window_met: bool
    use_hub_kernels: str  # the value transformers reads (default applied)
    use_hub_kernels_set: bool  # whether the variable is set in the environment
    hub_enabled_by_env: bool
    use_kernels_default: bool | None
    use_kernels_source: str
    refuses_when_unusable: bool  # set_use_kernels raises when kernels is unusable (read from source)
    mapping: tuple[MappingEntry, ...]
    mapping_source: str
    error: str | None = None

    @property
    def window_text(self) -> str:
        return f">={self.window[0]},<{self.window[1]}" if self.window else "unknown"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["mapping"] = [asdict(m) for m in self.mapping]
        d["window"] = self.window_text if self.window else None
        return d


@dataclass(frozen=True)
class VariantDecision:
    """kernels' decision for one build variant: accepted (the first accepted one is chosen) or rejected."""

    variant: str
    accepted: bool
    reason: str | None = None
    chosen: bool = False


@dataclass(frozen=True)
class Resolution:
    """Which build variant of one repository `kernels` would load here, and why the others lost."""

    repo_id: str
    version: int | None
    revision: str | None
    source: str  # LOCAL_KERNELS | hf-cache | hub | none
    location: str | None  # a path, or the Hub
    ref: str | None = None  # "v2"
    commit: str | None = None
    decisions: tuple[VariantDecision, ...] = ()
    chosen: str | None = None
    nearest: str | None = None
    would_match: str | None = None
    problem: str | None = None  # arch / minimum kernels version: kernels raises RuntimeError (not a fallback)
    error: str | None = None  # the listing itself failed (offline and not cached, Hub unreachable ...)
    notes: tuple[str, ...] = ()
    blocked: str | None = None  # the cached build exists but kernels' offline lookup will not return it

    @property
    def spec(self) -> str:
        return f"{self.repo_id}@v{self.version}" if self.version is not None else f"{self.repo_id}@{self.revision}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["decisions"] = [asdict(x) for x in self.decisions]
        d["notes"] = list(self.notes)
        return d


# ---------------------------------------------------------------------------------------------------------------
# What transformers says (read from the installed package)
# ---------------------------------------------------------------------------------------------------------------


class _RecordedRepo:
    """Stands in for kernels' LayerRepository/FuncRepository while transformers' mapping is evaluated:
    records the arguments without touching the network or depending on the kernels version."""

    def __init__(self, repo_id: Any = None, *args: Any, **kw: Any) -> None:
        self.repo_id = str(repo_id if repo_id is not None else kw.get("repo_path", ""))
        self.layer_name = kw.get("layer_name") or kw.get("func_name") or (args[0] if args else "")
        self.version = kw.get("version")
        self.revision = kw.get("revision")
        self.trust_remote_code = bool(kw.get("trust_remote_code", False))


def _kernels_namespace() -> dict[str, Any]:
    """Mode/Device/...Properties for evaluating the mapping: kernels' own classes when importable."""
    ns: dict[str, Any] = {"LayerRepository": _RecordedRepo, "FuncRepository": _RecordedRepo,
                          "LocalLayerRepository": _RecordedRepo, "LocalFuncRepository": _RecordedRepo}
    try:
        import kernels

        for name in ("Mode", "Device", "CUDAProperties", "ROCMProperties"):
            if hasattr(kernels, name):
                ns[name] = getattr(kernels, name)
    except Exception:  # noqa: BLE001 - kernels absent: simple stand-ins below
        pass
    if "Mode" not in ns:
        from enum import Flag, auto

        class Mode(Flag):
            FALLBACK = auto()
            TRAINING = auto()
            INFERENCE = auto()
            TORCH_COMPILE = auto()

        ns["Mode"] = Mode
    for name in ("Device", "CUDAProperties", "ROCMProperties"):
        if name not in ns:
            ns[name] = _simple_record(name)
    return ns


def _simple_record(name: str) -> type:
    def __init__(self: Any, **kw: Any) -> None:
        self.__dict__.update(kw)
        self.__dict__.setdefault("properties", None)

    return type(name, (), {"__init__": __init__})


def _module_source(dotted: str) -> tuple[str | None, str | None]:
    """Source text of a transformers module, read from the installed files without importing transformers
    (importing `transformers.utils` alone costs seconds; doctor stays static)."""
    try:
        spec = importlib.util.find_spec(dotted.split(".")[0])
    except (ImportError, ValueError):
        return None, None
    if spec is None or not spec.origin:
        return None, None
    path = Path(spec.origin).parent.joinpath(*dotted.split(".")[1:]).with_suffix(".py")
    if not path.is_file():
        return None, None
    return path.read_text(encoding="utf-8"), str(path)


def _mapping_from_source(src: str) -> dict[str, Any] | None:
    """Evaluate transformers' `_build_kernel_mapping()` (>= 5.2x) or `_KERNEL_MAPPING = {...}` (older)."""
    tree = ast.parse(src)
    ns = _kernels_namespace()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_build_kernel_mapping":
            mod = ast.Module(body=[node], type_ignores=[])
            exec(compile(mod, "<transformers _build_kernel_mapping>", "exec"), ns)  # noqa: S102 - trusted installed code
            return ns["_build_kernel_mapping"]()
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(target, ast.Name) \
                and target.id == "_KERNEL_MAPPING" and isinstance(node.value, ast.Dict):
            mod = ast.Module(body=[ast.Assign(targets=[ast.Name("_KERNEL_MAPPING", ast.Store())], value=node.value,
                                              lineno=node.lineno, col_offset=0)], type_ignores=[])
            ast.fix_missing_locations(mod)
            exec(compile(mod, "<transformers _KERNEL_MAPPING>", "exec"), ns)  # noqa: S102
            return ns["_KERNEL_MAPPING"]
    return None


def _mode_names(mode: Any) -> tuple[str, ...]:
    names = [m for m in ("TRAINING", "INFERENCE", "TORCH_COMPILE", "FALLBACK")
             if getattr(type(mode), m, None) is not None and getattr(type(mode), m) in mode]
    return tuple(names) or (str(mode),)


def _entries(mapping: dict[str, Any]) -> tuple[MappingEntry, ...]:
    out = []
    for name, per_device in mapping.items():
        if not isinstance(per_device, dict):
            continue
        for dev, repos in per_device.items():
            if isinstance(dev, str):
                dtype, cap = dev, None
            else:
                dtype = getattr(dev, "type", str(dev))
                props = getattr(dev, "properties", None)
                cap = (int(props.min_capability), int(props.max_capability)) if props is not None else None
            items = repos.items() if isinstance(repos, dict) else [(None, repos)]
            for mode, repo in items:
                if not isinstance(repo, _RecordedRepo):
                    continue
                modes = ("FALLBACK",) if mode is None else _mode_names(mode)
                out.append(MappingEntry(str(name), dtype, modes, HubRepo(repo.repo_id, str(repo.layer_name),
                                                                          repo.version, repo.revision,
                                                                          repo.trust_remote_code), cap))
    return tuple(out)


def _in_window(version: str | None, window: tuple[str, str] | None) -> bool:
    if not version or not window:
        return False
    from packaging.version import Version

    try:
        v = Version(version)
        return Version(window[0]) <= v < Version(window[1])
    except Exception:  # noqa: BLE001
        return False


def transformers_hub() -> TransformersHub:
    """Read the installed transformers: kernels window, USE_HUB_KERNELS, use_kernels default, Hub mapping."""
    tv = environment_mod.dist_version("transformers")
    kv = environment_mod.dist_version("kernels")
    if not tv:
        return TransformersHub(None, kv, None, "transformers not installed", False, "", False, False, None,
                               "transformers not installed", False, (), "none", "transformers is not installed")
    errors = []
    # kernels window: transformers.utils.import_utils (no need to import transformers' heavy parts)
    window, wsrc = None, "not declared by this transformers"
    iu_src, iu_path = _module_source("transformers.utils.import_utils")
    if iu_src:
        mn = re.search(r'^KERNELS_MIN_VERSION\s*=\s*["\']([^"\']+)["\']', iu_src, re.M)
        mx = re.search(r'^KERNELS_MAX_VERSION\s*=\s*["\']([^"\']+)["\']', iu_src, re.M)
        if mn and mx:
            window, wsrc = (mn.group(1), mx.group(1)), "transformers.utils.import_utils KERNELS_MIN_VERSION/KERNELS_MAX_VERSION"
    if window is None:
        from kernelcheck.core import matrix as matrix_mod
        from kernelcheck.core import rules as rules_mod

        for w in matrix_mod.load().transformers.get("kernels_window", []):
            if rules_mod.version_in(tv, w["transformers"]):
                lo = re.search(r">=\s*([\w.]+)", w["kernels"])
                hi = re.search(r"<\s*([\w.]+)", w["kernels"])
                if lo and hi:
                    window, wsrc = (lo.group(1), hi.group(1)), "matrix/transformers.toml kernels_window"
    # USE_HUB_KERNELS: transformers' default and truth set, read from its source
    hk_src, hk_path = _module_source("transformers.integrations.hub_kernels")
    default = "YES"
    if hk_src:
        m = re.search(r'os\.environ\.get\(\s*["\']USE_HUB_KERNELS["\']\s*,\s*["\'](\w+)["\']', hk_src)
        if m:
            default = m.group(1)
    raw = os.environ.get("USE_HUB_KERNELS", default).upper()
    truthy = _TRUE
    m = re.search(r"^ENV_VARS_TRUE_VALUES\s*=\s*(\{[^}]*\})", iu_src or "", re.M)
    if m:
        try:
            truthy = set(ast.literal_eval(m.group(1)))
        except (ValueError, SyntaxError):
            pass
    enabled = raw in truthy
    # use_kernels default: from_pretrained pops it from kwargs (5.x) or declares it as a parameter
    uk_default, uk_src, refuses = None, "not found in modeling_utils.py", False
    mu_src, mu_path = _module_source("transformers.modeling_utils")
    if mu_src:
        m = re.search(r'kwargs\.pop\(\s*["\']use_kernels["\']\s*,\s*(True|False)\s*\)', mu_src)
        if m is None:
            m = re.search(r'\buse_kernels\s*:\s*bool\s*=\s*(True|False)', mu_src)
        if m:
            uk_default = m.group(1) == "True"
            uk_src = f"transformers/modeling_utils.py line {mu_src[:m.start()].count(chr(10)) + 1}"
        sm = re.search(r"def set_use_kernels\(.*?(?=\n    def |\n    @)", mu_src, re.S)
        refuses = bool(sm and "is_kernels_available()" in sm.group(0) and "raise ValueError" in sm.group(0))
    mapping: tuple[MappingEntry, ...] = ()
    msrc = "none"
    if hk_src:
        try:
            got = _mapping_from_source(hk_src)
            if got is not None:
                mapping = _entries(got)
                msrc = "transformers/integrations/hub_kernels.py (" + (
                    "_build_kernel_mapping" if "_build_kernel_mapping" in hk_src else "_KERNEL_MAPPING") + \
                    ", read from the installed source)"
        except Exception as exc:  # noqa: BLE001 - a newer layout must not crash doctor
            errors.append(f"could not read transformers' Hub mapping: {type(exc).__name__}: {exc}")
    return TransformersHub(
        transformers=tv, kernels=kv, window=window, window_source=wsrc,
        window_met=_in_window(kv, window) if window else bool(kv),
        use_hub_kernels=raw, use_hub_kernels_set="USE_HUB_KERNELS" in os.environ, hub_enabled_by_env=enabled,
        use_kernels_default=uk_default, use_kernels_source=uk_src, refuses_when_unusable=refuses,
        mapping=mapping, mapping_source=msrc, error="; ".join(errors) or None,
    )


def model_hub_names(modeling_module: str) -> dict[str, str]:
    """Names the model's modeling module registers for Hub kernels: {name: "layer"|"function"}."""
    src, _ = _module_source(modeling_module)
    out: dict[str, str] = {}
    if not src:
        return out
    for m in re.finditer(r'@use_kernel_forward_from_hub\(\s*["\'](\w+)["\']', src):
        out.setdefault(m.group(1), "layer")
    for m in re.finditer(r'@use_kernel_func_from_hub(?:_with_fallback)?\(\s*["\'](\w+)["\']', src):
        out.setdefault(m.group(1), "function")
    return out


# ---------------------------------------------------------------------------------------------------------------
# Mapping lookup for a device and mode (kernels' own mode fallback order)
# ---------------------------------------------------------------------------------------------------------------


def _mode_priority(mode: str) -> list[tuple[str, ...]]:
    """kernels' `_MODE_FALLBACK_PRIORITY` for train/infer, as tuples of mode names."""
    try:
        from kernels import Mode
        from kernels.layer.repos import _MODE_FALLBACK_PRIORITY

        key = Mode.TRAINING if mode == "train" else Mode.INFERENCE
        return [_mode_names(m) for m in _MODE_FALLBACK_PRIORITY[key]]
    except Exception:  # noqa: BLE001 - same order as kernels 0.17.2
        if mode == "train":
            return [("TRAINING",), ("TRAINING", "TORCH_COMPILE"), ("FALLBACK",)]
        return [("INFERENCE",), ("INFERENCE", "TORCH_COMPILE"), ("TRAINING",), ("TRAINING", "TORCH_COMPILE"),
                ("FALLBACK",)]


def _cap(c: int) -> str:
    return f"{c // 10}.{c % 10}"


def select_entry(entries: list[MappingEntry], device: str, mode: str,
                 capability: int | None) -> tuple[MappingEntry | None, str]:
    """The entry kernelize would pick for `device`/`mode`, or None and why it keeps the torch forward."""
    dev = [e for e in entries if e.device == device]
    if not dev:
        devices = sorted({e.device for e in entries})
        return None, f"no Hub kernel for {device} (mapped only for {', '.join(devices)}): the torch forward stays"
    if device in ("cuda", "rocm"):
        ranged = [(e, e.capability) for e in dev if e.capability is not None]
        plain = [e for e in dev if e.capability is None]
        if capability is None:
            cand = plain
            if not cand:
                caps = ", ".join(_cap(lo) if lo == hi else f"{_cap(lo)}-{_cap(hi)}"
                                 for lo, hi in sorted({c for _, c in ranged}))
                return None, (f"mapped for {device} only on compute capability {caps}; no GPU here to compare "
                              "(on any other GPU the torch forward stays)")
        else:
            fits = [(e, c) for e, c in ranged if c[0] <= capability <= c[1]]
            if fits:  # kernels takes the smallest interval
                width = min(c[1] - c[0] for _, c in fits)
                cand = [e for e, c in fits if c[1] - c[0] == width]
            else:
                cand = plain
            if not cand:
                return None, f"no Hub kernel for {device} compute capability {_cap(capability)}: the torch forward stays"
        dev = cand
    for modes in _mode_priority(mode):
        for e in dev:
            if tuple(sorted(e.modes)) == tuple(sorted(modes)):
                return e, ""
    have = sorted({"|".join(e.modes) for e in dev})
    return None, (f"the {device} mapping has no kernel usable in {mode} mode (has {', '.join(have)}): "
                  "the torch forward stays")


# ---------------------------------------------------------------------------------------------------------------
# Variant listing and resolution with kernels' own code
# ---------------------------------------------------------------------------------------------------------------


def offline() -> bool:
    """True when the Hub may not be used (core/settings.py: HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE, KERNELCHECK_OFFLINE)."""
    from kernelcheck.core import settings

    return settings.hub_offline()


def cache_dir() -> Path:
    """The cache kernels uses: KERNELS_CACHE, else the Hugging Face hub cache."""
    if os.environ.get("KERNELS_CACHE"):
        return Path(os.environ["KERNELS_CACHE"])
    from huggingface_hub import constants

    return Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE)


def local_kernels() -> dict[str, Path]:
    """LOCAL_KERNELS="org/a=/path:org/b=/path2", parsed as kernels parses it."""
    raw = os.environ.get("LOCAL_KERNELS")
    if not raw:
        return {}
    out = {}
    for entry in raw.split(":"):
        if "=" in entry:
            repo, path = entry.split("=", 1)
            out[repo] = Path(path)
    return out


def _repo_folders(repo_id: str) -> list[Path]:
    from huggingface_hub.file_download import repo_folder_name

    base = cache_dir()
    # kernels reads both layouts: the "kernel" repo type (kernels--org--name) and the legacy "model" one
    return [base / repo_folder_name(repo_id=repo_id, repo_type=t) for t in ("kernel", "model")]


def _cache_snapshot(repo_id: str, version: int | None, revision: str | None) -> tuple[Path | None, str | None, str | None, str]:
    """(snapshot dir, ref, commit, why-not) for a repo in the HF cache."""
    ref = f"v{version}" if version is not None else revision
    for folder in _repo_folders(repo_id):
        if not folder.is_dir():
            continue
        commit = None
        if ref and (folder / "refs" / ref).is_file():
            commit = (folder / "refs" / ref).read_text().strip()
        elif revision and _HEX40.match(revision):
            commit = revision
        if commit is None:
            refs = sorted(p.name for p in (folder / "refs").iterdir()) if (folder / "refs").is_dir() else []
            return None, ref, None, (f"{folder} has no ref {ref} (refs: {', '.join(refs) or 'none'})")
        snap = folder / "snapshots" / commit
        if not snap.is_dir():
            return None, ref, commit, f"{folder} has ref {ref} -> {commit[:12]} but no snapshot for it"
        return snap, ref, commit, ""
    return None, ref, None, f"not in the cache ({_repo_folders(repo_id)[0]})"


def incomplete_snapshot(snapshot: Path, commit: str) -> tuple[Path, list[str]]:
    """(tree listing file, files it names that `snapshot` lacks). huggingface_hub >= 2.x caches the full tree
    of a commit in `trees/COMMIT.json` on download; offline, `snapshot_download(local_files_only=True)` without
    allow_patterns - which is how kernels looks up a cached kernel - raises IncompleteSnapshotError when any
    listed file is missing. A one-variant download leaves every other variant missing."""
    tree = snapshot.parent.parent / "trees" / f"{commit}.json"
    if not tree.is_file():
        return tree, []
    try:
        files = json.loads(tree.read_text(encoding="utf-8")).get("files", {})
    except (OSError, ValueError):
        return tree, []
    missing = [f for f in files if not (snapshot / f).is_file()
               and not f.endswith(".pyc") and "__pycache__/" not in f]  # kernels ignores bytecode
    return tree, missing


def _decide(variants: list[Any], target: Target | None) -> tuple[list[VariantDecision], list[Any], list[Any]]:
    """kernels' resolver on a list of kernels.variants.Variant; returns (decisions, accepted, rejected)."""
    from kernels.variants import VariantAccepted, resolve_variants

    if target is None:
        _, trace = resolve_variants(variants)
    else:
        trace = target.resolve(variants)
    accepted = [d.variant for d in trace if isinstance(d, VariantAccepted)]
    rejected = [d for d in trace if not isinstance(d, VariantAccepted)]
    out = []
    for d in trace:
        ok = isinstance(d, VariantAccepted)
        out.append(VariantDecision(d.variant.variant_str, ok, None if ok else d.reason,
                                   chosen=bool(accepted) and d.variant == accepted[0]))
    return out, accepted, rejected


@dataclass(frozen=True)
class Target:
    """The system to resolve for, when it is not this one (a docker build stage for another torch/CUDA).
    Fields left None are taken from this machine."""

    torch: str | None = None  # "2.11"
    cuda: str | None = None  # "13.0"; "" for a CPU build
    cxx11abi: bool | None = None
    cpu: str | None = None
    os: str | None = None

    def resolve(self, variants: list[Any]) -> list[Any]:
        import torch
        from kernels.backends import CPU, CUDA, _backend
        from kernels.variants import _resolve_variant_for_system
        from packaging.version import Version, parse

        tv = parse(self.torch or torch.__version__)
        if self.cuda is None:
            backend = _backend()
        else:
            backend = CUDA(version=Version(self.cuda)) if self.cuda else CPU()
        abi = self.cxx11abi if self.cxx11abi is not None else bool(torch.compiled_with_cxx11_abi())
        _, trace = _resolve_variant_for_system(
            variants=variants, selected_backend=backend, cpu=self.cpu or platform.machine(),
            os=self.os or platform.system().lower(), torch_version=Version(f"{tv.major}.{tv.minor}"),
            torch_cxx11_abi=abi, tvm_ffi_version=None)
        return trace


def _system(target: Target | None = None) -> dict[str, Any]:
    """This machine as kernels sees it, or the `target` (for the nearest-variant ranking)."""
    from kernels.backends import _backend

    if target is not None and (target.torch or target.cuda is not None):
        base = _system()
        if target.torch:
            major, minor = target.torch.split(".")[:2]
            base["torch"] = (int(major), int(minor))
        if target.cuda is not None:
            if target.cuda:
                major, minor = target.cuda.split(".")[:2]
                base.update(backend="cuda", cuda=(int(major), int(minor)))
            else:
                base.update(backend="cpu", cuda=None)
        return base

    try:
        import torch

        tv = torch.__version__.split("+")[0].split(".")
        torch_mm = (int(tv[0]), int(tv[1]))
        abi = bool(torch.compiled_with_cxx11_abi())
    except Exception:  # noqa: BLE001
        torch_mm, abi = None, None
    b = _backend()
    return {"cpu": platform.machine(), "os": platform.system().lower(), "torch": torch_mm, "abi": abi,
            "backend": b.name, "backend_variant": b.variant_str,
            "cuda": (b.version.major, b.version.minor) if b.name == "cuda" else None}


def _nearest(rejected: list[Any], target: Target | None = None) -> tuple[str | None, str | None]:
    """The rejected variant closest to this system, and the environment that would accept it."""
    from kernels.variants import NoarchVariant, Torch

    if not rejected:
        return None, None
    sysinfo = _system(target)

    def score(d: Any) -> tuple[int, ...]:
        v = d.variant
        if isinstance(v, NoarchVariant):
            return (0, 0, 1 if v.arch.backend_name != sysinfo["backend"] else 0, 0, 0)
        plat = (v.arch.platform != sysinfo["cpu"]) + (v.arch.os != sysinfo["os"])
        backend = 0 if v.arch.backend.name == sysinfo["backend"] else 1
        dist = 0
        if isinstance(v.framework, Torch) and sysinfo["torch"]:
            dist = abs((v.framework.version.major * 100 + v.framework.version.minor)
                       - (sysinfo["torch"][0] * 100 + sysinfo["torch"][1]))
        cuda_dist = 0
        if v.arch.backend.name == "cuda" and sysinfo["cuda"]:
            cuda_dist = abs(v.arch.backend.version.major - sysinfo["cuda"][0]) * 100 + \
                abs(v.arch.backend.version.minor - sysinfo["cuda"][1])
        return (plat, backend, dist, cuda_dist, 0)

    best = min(rejected, key=score).variant
    return best.variant_str, would_match(best)


def would_match(variant: Any) -> str:
    """In words: the torch/CUDA environment in which kernels would accept `variant`."""
    from kernels.variants import NoarchVariant, Torch, TorchStableAbi

    if isinstance(variant, NoarchVariant):
        name = variant.arch.backend_name
        return "any torch" if name == "universal" else f"any torch build for {name}"
    fw, arch = variant.framework, variant.arch
    if isinstance(fw, Torch):
        out = f"torch {fw.version.major}.{fw.version.minor}"
        if fw.cxx11_abi is not None:
            out += f" ({'cxx11' if fw.cxx11_abi else 'pre-cxx11'} ABI)"
    elif isinstance(fw, TorchStableAbi):
        out = f"torch >= {fw.version.major}.{fw.version.minor}"
    else:
        out = f"tvm-ffi {fw.version.major}.{fw.version.minor}"
    b = arch.backend
    if b.name == "cuda":
        out += f" built for CUDA {b.version.major}.{b.version.minor} or a later {b.version.major}.x"
    elif b.name == "cpu":
        out += " CPU build"
    else:
        out += f" built for {b.variant_str}"
    return out + f", on {arch.platform}-{arch.os}"


def _check_variant(meta_path: Path, variant: str, env: environment_mod.Environment | None) -> str | None:
    """What kernels' validators would raise for the chosen variant (RuntimeError: not a silent fallback)."""
    try:
        from kernels._rust import Backend, Metadata
    except Exception:  # noqa: BLE001
        return None
    if not meta_path.is_file():
        return None
    try:
        meta = Metadata.read_from_file(meta_path)
    except Exception as exc:  # noqa: BLE001
        return f"metadata.json of {variant} does not parse: {exc}"
    minver = meta.kernels_minver
    kv = environment_mod.dist_version("kernels")
    if minver is not None and kv:
        from packaging.version import Version

        try:
            if Version(kv).release < Version(str(minver)).release:
                return f"variant {variant} requires kernels>={minver}, installed {kv}: kernels raises RuntimeError"
        except Exception:  # noqa: BLE001
            pass
    archs = meta.backend.archs
    if archs and env is not None and env.capabilities and meta.backend.backend_type == Backend.CUDA:
        try:
            from kernels.archs import _supports_cuda_capability
        except Exception:  # noqa: BLE001
            return None
        for cap in env.capabilities:
            major, minor = (int(x) for x in cap.split("."))
            if not _supports_cuda_capability(list(archs), (major, minor)):
                return (f"variant {variant} is built for {', '.join(archs)}, not for this GPU's sm_{major}{minor}: "
                        "kernels' arch check raises RuntimeError (load fails, no fallback)")
    return None


def resolve_repo(repo_id: str, *, version: int | None = None, revision: str | None = None,
                 source: str = "auto", env: environment_mod.Environment | None = None,
                 target: Target | None = None) -> Resolution:
    """Which variant of `repo_id` kernels would load here, listed the way kernels would list it.

    source: "auto" follows kernels (LOCAL_KERNELS, then the HF cache when offline or the Hub when online;
    if the Hub cannot be reached, the cache answers with a note); "cache" never uses the network; "hub" asks
    the Hub (an error when offline).
    """
    from kernels.variants import get_variants_local

    notes: list[str] = []
    locals_ = local_kernels()
    if repo_id in locals_ and source in ("auto", "cache"):
        path = locals_[repo_id]
        variants = get_variants_local(path)
        base = path
        if not variants or not _decide(variants, target)[1]:
            more = get_variants_local(path / "build")
            if more:
                variants, base = more, path / "build"
        decisions, accepted, rejected = _decide(variants, target)
        near, match = (None, None) if accepted else _nearest(rejected, target)
        problem = _check_variant(base / accepted[0].variant_str / "metadata.json", accepted[0].variant_str, env) \
            if accepted else None
        return Resolution(repo_id, version, revision, "LOCAL_KERNELS", str(path), None, None, tuple(decisions),
                          accepted[0].variant_str if accepted else None, near, match, problem,
                          None if variants else f"LOCAL_KERNELS points {repo_id} at {path}, which holds no build variant",
                          ("LOCAL_KERNELS overrides the Hub for this repository (kernels reads it first)",))
    use_hub = source == "hub" or (source == "auto" and not offline())
    if use_hub:
        if offline():
            return Resolution(repo_id, version, revision, "none", None,
                              error="the Hub may not be used (HF_HUB_OFFLINE/KERNELCHECK_OFFLINE is set)")
        try:
            return _resolve_hub(repo_id, version, revision, env, target)
        except Exception as exc:  # noqa: BLE001 - the cache may still answer
            msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if source == "hub":
                return Resolution(repo_id, version, revision, "none", "hub", error=f"the Hub could not be asked ({msg})")
            notes.append(f"the Hub could not be asked ({msg}); the Hugging Face cache answered instead")
    snap, ref, commit, why = _cache_snapshot(repo_id, version, revision)
    if snap is None:
        hint = "offline (HF_HUB_OFFLINE)" if offline() else (notes[0] if notes else "the Hub was not asked")
        return Resolution(repo_id, version, revision, "none", str(cache_dir()), ref, commit,
                          error=f"{why}; {hint}", notes=tuple(notes[1:]))
    variants = get_variants_local(snap / "build")
    decisions, accepted, rejected = _decide(variants, target)
    near, match = (None, None) if accepted else _nearest(rejected, target)
    problem = _check_variant(snap / "build" / accepted[0].variant_str / "metadata.json", accepted[0].variant_str,
                             env) if accepted else None
    blocked = None
    tree, missing = incomplete_snapshot(snap, commit or "")
    if accepted and missing:
        blocked = (f"huggingface_hub's cached listing {tree} names {len(missing)} file(s) this snapshot lacks "
                   f"(e.g. {missing[0]}), so offline kernels' cache lookup raises 'Cannot find a local snapshot' "
                   "and kernelize keeps the torch forward; `kernelcheck hub --prefetch` repairs it")
    notes.append("the cache holds only the variants downloaded so far; the Hub may have more")
    return Resolution(repo_id, version, revision, "hf-cache", str(snap), ref, commit, tuple(decisions),
                      accepted[0].variant_str if accepted else None, near, match, problem,
                      None if variants else f"{snap / 'build'} holds no build variant", tuple(notes), blocked)


def _hub_api() -> Any:
    """kernelcheck's own Hub client (huggingface_hub). Not kernels' `_get_hf_api`: with
    HF_HUB_DISABLE_TELEMETRY=1 that one sends an invalid User-Agent (see `kernels_client_problem`)."""
    from huggingface_hub import HfApi

    from kernelcheck import __version__

    return HfApi(library_name="kernelcheck", library_version=__version__)


def kernels_client_problem() -> str | None:
    """Whether kernels' own Hub client can send a request at all, asked from the installed packages.

    kernels 0.17.2 builds its User-Agent as "; ".join(parts) and, with HF_HUB_DISABLE_TELEMETRY=1, passes an
    empty string that huggingface_hub appends as "...; " - a header value with trailing whitespace, which
    httpx refuses (LocalProtocolError) before anything is sent."""
    try:
        from huggingface_hub.utils import build_hf_headers
        from kernels.hf_hub import _get_hf_api

        api = _get_hf_api()
        ua = build_hf_headers(token=False, library_name=api.library_name, library_version=api.library_version,
                              user_agent=api.user_agent).get("user-agent", "")
    except Exception:  # noqa: BLE001 - cannot tell: say nothing
        return None
    if ua != ua.strip():
        return (f"kernels' Hub client sends the User-Agent {ua!r}, whose trailing whitespace httpx refuses "
                "(LocalProtocolError): every Hub request kernels makes fails"
                + (" - caused by HF_HUB_DISABLE_TELEMETRY=1" if os.environ.get("HF_HUB_DISABLE_TELEMETRY") else ""))
    return None


def _hub_versions(api: Any, repo_id: str) -> dict[int, Any]:
    """Branches vN -> GitRefInfo, as kernels' `_get_available_versions` reads them."""
    refs = api.list_repo_refs(repo_id=repo_id, repo_type="kernel")
    out = {}
    for b in refs.branches:
        if b.name.startswith("v") and b.name[1:].isdigit():
            out[int(b.name[1:])] = b
    return out


def _resolve_hub(repo_id: str, version: int | None, revision: str | None,
                 env: environment_mod.Environment | None, target: Target | None) -> Resolution:
    from kernels.variants import get_variants

    api = _hub_api()
    ref, commit = revision, None
    if version is not None:
        versions = _hub_versions(api, repo_id)
        info = versions.get(version)
        if info is None:
            avail = ", ".join(f"v{v}" for v in sorted(versions)) or "none"
            return Resolution(repo_id, version, revision, "hub", "hub", f"v{version}",
                              error=f"the Hub repository has no version v{version} (versions: {avail})")
        ref, commit = f"v{version}", info.target_commit
    rev = commit or revision or "main"
    variants = get_variants(api, repo_id=repo_id, revision=rev)
    decisions, accepted, rejected = _decide(variants, target)
    near, match = (None, None) if accepted else _nearest(rejected, target)
    return Resolution(repo_id, version, revision, "hub", f"{api.endpoint}/kernels/{repo_id}", ref,
                      commit if commit else (revision if revision and _HEX40.match(revision) else None),
                      tuple(decisions), accepted[0].variant_str if accepted else None, near, match, None,
                      None if variants else "the Hub repository lists no build variant")


# ---------------------------------------------------------------------------------------------------------------
# Pre-fetch and lock (for offline jobs)
# ---------------------------------------------------------------------------------------------------------------


def write_lock(resolutions: list[Resolution], path: str | os.PathLike[str]) -> Path:
    """Write a lock in kernels' own format (`KernelLocks.to_json`): repo + version -> commit.

    kernels reads it with `kernels.load_kernel(repo, lockfile=...)`, `LockedLayerRepository(...,
    lockfile=...)` and `kernels download DIR` (for DIR/kernels.lock)."""
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    locks = {}
    for r in resolutions:
        if not r.commit or not _HEX40.match(r.commit):
            continue
        ver = KernelVersion.Version(r.version) if r.version is not None else KernelVersion.Revision(r.revision or r.commit)
        locks[KernelDependency(repo_id=r.repo_id, version=ver)] = KernelLock(commit=r.commit)
    p = Path(path)
    if p.is_dir():
        p = p / "kernels.lock"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(KernelLocks(locks=locks).to_json(), encoding="utf-8")
    return p


def _download(r: Resolution) -> str:
    """Download exactly the chosen variant. By ref (vN) so the cache also records refs/vN -> commit: an
    offline `LayerRepository(version=N)` needs that ref to find the snapshot."""
    from kernels.hf_hub import CACHE_DIR
    from kernels.resolver import _BYTECODE_IGNORE_PATTERNS

    api = _hub_api()
    return str(api.snapshot_download(r.repo_id, repo_type="kernel", revision=r.ref or r.commit,
                                     allow_patterns=[f"build/{r.chosen}/*"], ignore_patterns=_BYTECODE_IGNORE_PATTERNS,
                                     cache_dir=CACHE_DIR))


def _repair(snapshot: Path, r: Resolution) -> str:
    """Make a one-variant snapshot loadable offline by kernels: drop huggingface_hub's cached tree listing
    when it names files of *other* variants only (it is an optimisation for later downloads; without it the
    offline completeness check has nothing to compare and kernels gets the snapshot). Returns a note."""
    commit = snapshot.name
    tree, missing = incomplete_snapshot(snapshot, commit)
    if not missing:
        return ""
    own = f"build/{r.chosen}/"
    if any(m.startswith(own) for m in missing):
        return f"; WARNING: files of {r.chosen} itself are missing ({[m for m in missing if m.startswith(own)][:3]})"
    tree.unlink()
    return (f"; removed {tree} (it lists the {len(missing)} files of the other variants, which would make "
            "kernels' offline lookup call this snapshot incomplete)")


def prefetch(repos: list[HubRepo], *, env: environment_mod.Environment | None = None,
             lock_path: str | os.PathLike[str] | None = None, dry_run: bool = False,
             progress: Callable[[str], None] | None = None, target: Target | None = None,
             offline_only: bool = False) -> list[dict[str, Any]]:
    """Pre-download the variant kernels would choose here for each repo, then write a kernels lock.

    Returns plan steps {package, action, source: "hub", spec, reason, command?} with action one of
    download (done), cached (already complete in the cache), would-download (dry run), missing (no
    variant for this system), failed (could not download/list). Offline it only verifies the cache."""
    steps: list[dict[str, Any]] = []
    done: list[Resolution] = []
    seen = set()
    for repo in repos:
        key = (repo.repo_id, repo.version, repo.revision)
        if key in seen:
            continue
        seen.add(key)
        say = progress or (lambda s: None)
        say(f"resolving {repo.spec}")
        r = resolve_repo(repo.repo_id, version=repo.version, revision=repo.revision, env=env, target=target,
                         source="cache" if offline_only else "auto")
        spec = f"{r.spec}/{r.chosen}" if r.chosen else r.spec
        if r.source == "LOCAL_KERNELS":
            steps.append({"package": repo.repo_id, "action": "local", "source": "hub", "spec": spec,
                          "reason": f"LOCAL_KERNELS points at {r.location}; nothing to download"})
            continue
        if r.error and not r.chosen:
            steps.append({"package": repo.repo_id, "action": "failed", "source": "hub", "spec": spec,
                          "reason": r.error, "command": "kernelcheck hub --prefetch (online, HF_HUB_OFFLINE unset)"})
            continue
        if not r.chosen:
            steps.append({"package": repo.repo_id, "action": "missing", "source": "hub", "spec": spec,
                          "reason": f"no build variant for this system ({r.source}); nearest {r.nearest}, which would "
                                    f"match {r.would_match}",
                          "rejected": [{"candidate": d.variant, "reason": d.reason} for d in r.decisions]})
            continue
        if r.source == "hf-cache" and r.location:
            ok = (Path(r.location) / "build" / r.chosen / "metadata.json").is_file()
            fixed = _repair(Path(r.location), r) if ok and not dry_run else ""
            steps.append({"package": repo.repo_id, "action": "cached" if ok else "failed", "source": "hub",
                          "spec": spec, "reason": (f"already in the cache at {r.location}/build/{r.chosen}{fixed}" if ok
                                                   else f"the cached variant {r.chosen} is incomplete (no metadata.json)")})
            if ok:
                done.append(r)
            continue
        if dry_run:
            steps.append({"package": repo.repo_id, "action": "would-download", "source": "hub", "spec": spec,
                          "reason": f"kernels would choose {r.chosen} here"})
            continue
        try:
            say(f"downloading {spec}")
            where = _download(r)
            if not (Path(where) / "build" / r.chosen / "metadata.json").is_file():
                raise FileNotFoundError(f"the download finished but {where}/build/{r.chosen}/metadata.json is missing")
            fixed = _repair(Path(where), r)
            steps.append({"package": repo.repo_id, "action": "download", "source": "hub", "spec": spec,
                          "reason": f"kernels chooses {r.chosen} here; downloaded to {where} with ref {r.ref or r.commit}"
                                    f"{fixed}"})
            done.append(r)
        except Exception as exc:  # noqa: BLE001
            steps.append({"package": repo.repo_id, "action": "failed", "source": "hub", "spec": spec,
                          "reason": f"download failed: {type(exc).__name__}: {exc}"})
    if lock_path is not None and done and not dry_run:
        p = write_lock(done, lock_path)
        pins = ", ".join(f"{r.spec}={(r.commit or '')[:12]}" for r in done)
        steps.append({"package": "kernels.lock", "action": "lock", "source": "hub", "spec": str(p),
                      "reason": f"pins {pins} in kernels' lock format"})
    return steps


# ---------------------------------------------------------------------------------------------------------------
# After loading: was each Hub kernel really applied?
# ---------------------------------------------------------------------------------------------------------------


def _forward_state(mod: Any) -> tuple[bool, str]:
    fwd = getattr(mod, "forward", None)
    func = getattr(fwd, "__func__", None)
    cls_fwd = type(mod).forward
    applied = func is not None and func is not cls_fwd
    impl = func if func is not None else fwd
    name = f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', repr(impl))}"
    return applied, name


def applied_kernels(model: Any, expected: set[str] | None = None) -> list[dict[str, Any]]:
    """For a model loaded with `use_kernels=True` (or passed through `kernels.kernelize`): per Hub name,
    whether the Hub kernel replaced the torch forward.

    Layers: kernelize replaces the instance's `forward` (applied iff `m.forward.__func__ is not
    type(m).forward`; on a fallback kernels re-binds the class's own forward). Functions: with kernels usable,
    transformers' `use_kernel_func_from_hub_with_fallback` wraps each function in a kernels `Func` module
    (attached to layers as `_kernel_funcs`), whose forward kernelize replaces the same way. Empty when the
    classes carry no `kernel_layer_name` (transformers saw no usable `kernels`).

    Each row: {name, kind (layer|function), modules, applied (count), implementations, where, status}; status is
    applied | partly | original (the original forward kept) | missed (in `expected`, e.g. the names doctor
    found mapped for this device, but the original forward kept: the silent slow path)."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    seen_funcs: set[int] = set()

    def add(kind: str, name: str, where: str, mod: Any) -> None:
        applied, impl = _forward_state(mod)
        g = groups.setdefault((kind, name), {"name": name, "kind": kind, "modules": 0, "applied": 0,
                                             "implementations": [], "where": []})
        g["modules"] += 1
        g["applied"] += int(applied)
        if impl not in g["implementations"]:
            g["implementations"].append(impl)
        if len(g["where"]) < 3:
            g["where"].append(where)

    for path, mod in model.named_modules():
        for fname, fmod in getattr(mod, "_kernel_funcs", {}).items():
            if id(fmod) in seen_funcs:
                continue
            seen_funcs.add(id(fmod))
            add("function", str(getattr(type(fmod), "kernel_layer_name", fname)), f"{path}._kernel_funcs[{fname}]", fmod)
        lname = getattr(type(mod), "kernel_layer_name", None)
        if lname is not None:
            add("layer", str(lname), path or type(model).__name__, mod)
    out = []
    for g in groups.values():
        g["expected"] = bool(expected and g["name"] in expected)
        if g["applied"] == g["modules"]:
            g["status"] = "applied"
        elif g["applied"]:
            g["status"] = "partly"
        else:
            g["status"] = "missed" if g["expected"] else "original"
        out.append(g)
    return sorted(out, key=lambda g: (g["kind"], g["name"]))


def applied_lines(rows: list[dict[str, Any]], use_kernels: bool | None = None) -> list[str]:
    """Text lines for `applied_kernels` output."""
    if not rows:
        return ["no layer or function carries a Hub kernel name: transformers did not see a usable `kernels` "
                "(outside its version window, USE_HUB_KERNELS off, or not installed), so nothing could be applied"]
    out = []
    if use_kernels is False:
        out.append("model.use_kernels is False: kernelize was not run")
    for g in rows:
        word = {"applied": "APPLIED", "partly": "PARTLY", "original": "original", "missed": "MISSED"}[g["status"]]
        out.append(f"{word:<8} {g['kind']:<8} {g['name']}: {g['applied']}/{g['modules']} "
                   f"-> {', '.join(g['implementations'])}")
    return out


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str)


# ---------------------------------------------------------------------------------------------------------------
# Model-level entry points (used by `kernelcheck hub` and `kernelcheck install --source hub`)
# ---------------------------------------------------------------------------------------------------------------


def modeling_module(model_spec_module: str) -> str:
    """transformers' dotted modeling module for a model_type module name (qwen3_5 -> ...modeling_qwen3_5)."""
    return f"transformers.models.{model_spec_module}.modeling_{model_spec_module}"


def model_repos(modeling: str, functions: tuple[str, ...], mode: str, device: str,
                capability: int | None = None) -> list[HubRepo]:
    """The Hub repositories kernelize would load for this model on `device` in `mode` (deduplicated)."""
    th = transformers_hub()
    names = model_hub_names(modeling)
    for f in functions:
        names.setdefault(f, "function")
    out: list[HubRepo] = []
    for name in names:
        entry, _ = select_entry([e for e in th.mapping if e.name == name], device, mode, capability)
        if entry is not None and all(r.spec != entry.repo.spec for r in out):
            out.append(entry.repo)
    return out


def prefetch_model(query: str, *, mode: str = "train", device: str | None = None,
                   lock_path: str | os.PathLike[str] | None = None, dry_run: bool = False,
                   env: environment_mod.Environment | None = None,
                   progress: Callable[[str], None] | None = None,
                   target: Target | None = None, offline_only: bool = False) -> list[dict[str, Any]]:
    """`install --source hub`: pre-download the build kernels would choose here for every Hub kernel the
    model's layers/functions map to (for `device`, default from the torch build, and `mode`), and write a
    kernels lock at `lock_path`. `target` resolves for another torch/CUDA than this one (a build machine
    preparing a GPU image); `offline_only` never uses the network (verifies/repairs the cache). Returns plan
    steps {package, action, source, spec, reason}."""
    from kernelcheck.core import models as models_mod
    from kernelcheck.core.gpu import capability_number, default_device

    env = env or environment_mod.probe(packages=False)
    model = models_mod.resolve(query)
    dev = device or ("cuda" if target is not None and target.cuda else default_device(env))
    repos = model_repos(modeling_module(model.spec.module), tuple(model.spec.functions), mode, dev,
                        capability_number(env))
    if not repos:
        return [{"package": "-", "action": "skip", "source": "hub", "spec": "-",
                 "reason": f"transformers maps no Hub kernel for {model.model_type}'s layers/functions on {dev} in "
                           f"{mode} mode: nothing to pre-fetch"}]
    return prefetch(repos, env=env, lock_path=lock_path, dry_run=dry_run, progress=progress, target=target,
                    offline_only=offline_only)
