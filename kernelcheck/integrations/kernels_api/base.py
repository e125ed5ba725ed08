"""What kernelcheck needs from the `kernels` package, as plain values, and the adapter every generation fills in.

kernels moves its private names between releases (0.15: `kernels.utils`, no `_rust`; 0.17: `kernels.hf_hub.CACHE_DIR`;
0.18: `_get_cache_dir()` only; 0.19: everything under `kernels._internals`, variants with a Python ABI and a
`system`). The rest of kernelcheck sees only these values: a `VariantInfo` per build variant, a `Decision` per
variant from kernels' own resolver, a `MetaInfo` from a variant's metadata.json, and lock text in kernels' format.
Each generation (gen015 ... gen019) says where kernels keeps each name; the public API comes first
(`kernels.Metadata`, `kernels.Mode`), private names only where the public API has no equivalent.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import LayoutError
from kernelcheck.integrations.kernels_api.validation import Validators

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VariantInfo:
    """One build variant as kernels parsed it, in kernelcheck's words (no kernels class leaks out)."""

    variant: str  # kernels' variant_str, the folder name under build/
    kind: str  # arch | noarch | sdk
    framework: str | None = None  # torch | torch-stable-abi | tvm-ffi (arch variants)
    framework_version: tuple[int, int] | None = None
    cxx11_abi: bool | None = None
    backend: str = ""  # cuda | rocm | cpu | xpu | universal ... (a noarch variant's backend name)
    backend_version: tuple[int, int] | None = None
    backend_variant: str = ""  # cu126, cuda-13.0, rocm63 ...
    platform: str | None = None  # x86_64
    os: str | None = None  # linux


@dataclass(frozen=True)
class Decision:
    """kernels' decision for one variant, in kernels' preference order (the first accepted one is loaded)."""

    info: VariantInfo
    accepted: bool
    reason: str | None = None


@dataclass(frozen=True)
class MetaInfo:
    """What kernels' validators read from a variant's metadata.json."""

    kernels_minver: str | None
    backend: str | None  # cuda | rocm | cpu ... (lower case)
    archs: tuple[str, ...]


@dataclass(frozen=True)
class System:
    """The system kernels resolves for. Fields left None are read from this machine by kernels itself."""

    torch: tuple[int, int] | None = None
    cuda: tuple[int, int] | None = None  # (13, 0); with cpu_build False
    cpu_build: bool = False
    cxx11abi: bool | None = None
    cpu: str | None = None
    os: str | None = None


def _pair(version: Any) -> tuple[int, int] | None:
    if version is None:
        return None
    return (int(version.major), int(version.minor))


class KernelsApi(Validators):
    """The adapter base: the names 0.17-0.19 share. Each generation overrides where its release moved one."""

    generation = "base"
    prefix = "kernels"  # where kernels' modules live (0.19: kernels._internals)
    newer_than_known: str | None = None  # set by the guard: the installed version this layout was matched on

    def __init__(self, version: str | None) -> None:
        self.version = version

    # -- where names live ---------------------------------------------------------------------------------------
    def module(self, name: str) -> Any:
        where = "kernels" if name == "_rust" else self.prefix  # the compiled module stays at kernels._rust
        try:
            return importlib.import_module(f"{where}.{name}" if name else where)
        except ImportError as exc:
            raise LayoutError(f"{self.prefix}.{name} ({exc})") from exc

    def name(self, module: str, attr: str) -> Any:
        mod = self.module(module)
        if not hasattr(mod, attr):
            raise LayoutError(f"{mod.__name__}.{attr}")
        return getattr(mod, attr)

    def probe(self) -> list[str]:
        """The names this generation needs to list and resolve variants that are missing here (empty: usable)."""
        missing = []
        for module, attr in (("variants", "get_variants_local"), ("variants", "get_variants"),
                             ("variants", "resolve_variants"), ("variants", "_resolve_variant_for_system"),
                             ("backends", "_backend"), ("backends", "CPU"), ("backends", "CUDA")):
            try:
                self.name(module, attr)
            except LayoutError as exc:
                missing.append(str(exc).split(" (")[0])
        return missing

    # -- variants -----------------------------------------------------------------------------------------------
    def list_local(self, path: Path) -> list[Any]:
        return list(self.name("variants", "get_variants_local")(path))

    def list_hub(self, api: Any, repo_id: str, revision: str) -> list[Any]:
        return list(self.name("variants", "get_variants")(api, repo_id=repo_id, revision=revision))

    def resolve(self, variants: list[Any], system: System | None = None) -> list[Decision]:
        """kernels' resolver (its order, its reasons) for this machine, or for `system`."""
        if system is None:
            _, trace = self.name("variants", "resolve_variants")(variants)
        else:
            _, trace = self.name("variants", "_resolve_variant_for_system")(**self._system_args(variants, system))
        return [Decision(self.describe(d.variant), not hasattr(d, "reason"), getattr(d, "reason", None))
                for d in trace]

    def _system_args(self, variants: list[Any], system: System) -> dict[str, Any]:
        import torch
        from packaging.version import Version, parse

        tv = parse(torch.__version__)
        mm = system.torch or (tv.major, tv.minor)
        if system.cpu_build:
            backend = self.name("backends", "CPU")()
        elif system.cuda is not None:
            backend = self.name("backends", "CUDA")(version=Version(f"{system.cuda[0]}.{system.cuda[1]}"))
        else:
            backend = self.name("backends", "_backend")()
        args: dict[str, Any] = dict(
            variants=variants, selected_backend=backend, cpu=system.cpu or platform.machine(),
            os=system.os or platform.system().lower(), torch_version=Version(f"{mm[0]}.{mm[1]}"),
            torch_cxx11_abi=system.cxx11abi if system.cxx11abi is not None else bool(torch.compiled_with_cxx11_abi()),
            tvm_ffi_version=None)
        params = inspect.signature(self.name("variants", "_resolve_variant_for_system")).parameters
        if "python_version" in params:  # 0.19: variants carry a minimum Python; this interpreter's
            args["python_version"] = Version(f"{sys.version_info.major}.{sys.version_info.minor}")
        return args

    def describe(self, v: Any) -> VariantInfo:
        """A kernels variant object as a VariantInfo (0.15-0.18 shape: `.arch` holds backend, platform, os)."""
        kind = type(v).__name__
        if kind == "NoarchVariant":
            return VariantInfo(v.variant_str, "noarch", backend=v.arch.backend_name)
        return self._arch_info(v, v.arch.backend, v.arch.platform, v.arch.os)

    def _arch_info(self, v: Any, backend: Any, plat: str | None, os_: str | None) -> VariantInfo:
        fw = v.framework
        names = {"Torch": "torch", "TorchStableAbi": "torch-stable-abi", "TvmFfi": "tvm-ffi"}
        return VariantInfo(
            v.variant_str, "arch", names.get(type(fw).__name__, type(fw).__name__), _pair(getattr(fw, "version", None)),
            getattr(fw, "cxx11_abi", None), backend.name, _pair(getattr(backend, "version", None)), backend.variant_str,
            plat, os_)

    def this_system(self) -> dict[str, Any]:
        """This machine's backend as kernels detects it (from the torch build, not the GPU)."""
        b = self.name("backends", "_backend")()
        return {"backend": b.name, "backend_variant": b.variant_str, "cuda": _pair(getattr(b, "version", None))
                if b.name == "cuda" else None}

    # -- metadata, arch check -------------------------------------------------------------------------------------
    def metadata_class(self) -> Any:
        import kernels

        if hasattr(kernels, "Metadata"):  # public from 0.19 (and 0.15, from kernels_data)
            return kernels.Metadata
        return self.name("_rust", "Metadata")

    def read_metadata(self, path: Path) -> MetaInfo:
        meta = self.metadata_class().read_from_file(path)
        backend = getattr(meta, "backend", None)
        btype = getattr(backend, "backend_type", None)
        archs = getattr(backend, "archs", None)
        minver = getattr(meta, "kernels_minver", None)
        return MetaInfo(None if minver is None else str(minver),
                        str(btype).split(".")[-1].lower() if btype is not None else None,
                        tuple(str(a) for a in archs) if archs else ())

    def capability_check(self) -> Callable[[list[str], tuple[int, int]], bool] | None:
        try:
            check: Callable[[list[str], tuple[int, int]], bool] = self.name("archs", "_supports_cuda_capability")
        except LayoutError:
            return None
        return check

    # -- versions, cache, download, lock --------------------------------------------------------------------------
    def cached_versions(self, repo_id: str) -> dict[int, str]:
        """{N: commit} of refs/vN in the cache, read by kernels' own `_get_available_versions_from_cache`."""
        found = self.name("_versions", "_get_available_versions_from_cache")(repo_id)
        return {int(k): str(getattr(v, "target_commit", "")) for k, v in found.items()}

    def offline_version_error(self, repo_id: str, version: int) -> str | None:
        """The ValueError kernels raises offline for `version` of `repo_id` (None when it resolves)."""
        fn = self.name("_versions", "resolve_version_spec_as_ref")
        kwargs = {"local_files_only": True} if "local_files_only" in inspect.signature(fn).parameters else {}
        if not kwargs:
            return None  # 0.15 reads HF_HUB_OFFLINE itself: only asked offline (see Gen015)
        try:
            fn(repo_id, version, **kwargs)
        except ValueError as exc:
            return str(exc)
        return None

    def cache_dir(self) -> str | None:
        """kernels' cache (KERNELS_CACHE) or None for huggingface_hub's default."""
        hf = self.module("hf_hub")
        found: str | None = hf._get_cache_dir() if hasattr(hf, "_get_cache_dir") else getattr(hf, "CACHE_DIR", None)
        return found

    def bytecode_ignore_patterns(self) -> list[str]:
        try:
            return list(self.name("resolver", "_BYTECODE_IGNORE_PATTERNS"))
        except LayoutError:
            return ["*.pyc", "**/__pycache__/**"]  # kernels' own patterns since 0.17

    def lock_text(self, pins: list[tuple[str, int | None, str | None, str]]) -> str:
        """kernels' lock (KernelLocks.to_json) for (repo_id, version, revision, commit) pins."""
        r = self.module("_rust")
        locks = {}
        for repo_id, version, revision, commit in pins:
            ver = (r.KernelVersion.Version(version) if version is not None
                   else r.KernelVersion.Revision(revision or commit))
            locks[r.KernelDependency(repo_id=repo_id, version=ver)] = r.KernelLock(commit=commit)
        return str(r.KernelLocks(locks=locks).to_json())

    def hf_api(self) -> Any:
        return self.name("hf_hub", "_get_hf_api")()

    def kernelized(self, model: Any) -> dict[str, str] | None:
        """kernels' own record of which Hub kernel replaced which layer or function of `model`
        (`kernels.get_kernelized_layers`, public from 0.19): {"layer path": repo, "layer path:function": repo}.
        None where the installed kernels has no such function (feature-detected, whatever the generation)."""
        import kernels

        fn = getattr(kernels, "get_kernelized_layers", None)
        if fn is None:
            return None
        got = fn(model)
        out = {str(name): str(k.repo) for name, k in getattr(got, "layers", {}).items()}
        out.update({f"{layer}:{func}": str(k.repo) for (layer, func), k in getattr(got, "funcs", {}).items()})
        return out

    def mode_priority(self) -> dict[Any, list[Any]]:
        return dict(self.name("layer.repos", "_MODE_FALLBACK_PRIORITY"))
