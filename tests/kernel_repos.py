"""Kernel Hub repositories written on disk, in the layout the real `kernels` package reads.

HF cache layout (kernels 0.17.2 `_versions._get_available_versions_from_cache` and
`resolver.resolve_hub_cache_kernel`; folder name from huggingface_hub `repo_folder_name(repo_type="kernel")`):

    $HF_HUB_CACHE/kernels--ORG--NAME/refs/vN                       -> commit (40 hex)
    $HF_HUB_CACHE/kernels--ORG--NAME/snapshots/COMMIT/build/VARIANT/{metadata.json, __init__.py, layers.py}

A LOCAL_KERNELS folder is the same `build/VARIANT/...` tree without refs/snapshots.
Every variant is pure Python (a torch layer), so it loads on the CPU test machine whatever its name says.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

# A layer whose forward matches transformers' Qwen3_5RMSNormGated.forward(self, hidden_states, gate), and one
# matching the gated-delta-rule function signature (kernels checks argument count and kinds).
LAYERS_PY = '''import torch


class TinyRMSNormGated(torch.nn.Module):
    """Marks its output (x2) so a test can see it ran."""

    def forward(self, hidden_states, gate):
        return hidden_states * 2


class FusedRMSNormGated(TinyRMSNormGated):
    pass


class chunk_gated_delta_rule(torch.nn.Module):
    def forward(self, query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
                use_qk_l2norm_in_kernel=False, **kwargs):
        return value * 0, None
'''


def _backend(variant: str) -> dict:
    if "-cu" in variant:
        return {"type": "cuda", "archs": ["8.0", "9.0"]}
    if "-rocm" in variant:
        return {"type": "rocm", "archs": ["gfx942"]}
    return {"type": "cpu"}


def write_variant(folder: Path, name: str, variant: str, backend: dict | None = None) -> None:
    """One pure-Python build variant; `backend` overrides the metadata.json backend (e.g. other CUDA archs)."""
    d = folder / variant
    d.mkdir(parents=True, exist_ok=True)
    ident = f"_{name.replace('-', '_')}_{hashlib.sha1(str(d).encode()).hexdigest()[:10]}"
    (d / "metadata.json").write_text(json.dumps({
        "id": ident, "name": name, "version": 1, "license": "apache-2.0", "python-depends": [],
        "backend": backend or _backend(variant)}))
    (d / "__init__.py").write_text("from . import layers\n\n__all__ = ['layers']\n")
    (d / "layers.py").write_text(LAYERS_PY)


def cache_repo(cache: Path, repo_id: str, variants: list[str], versions: tuple[int, ...] = (1, 2, 3, 4, 5),
               name: str | None = None) -> str:
    """Write `repo_id` into the HF cache `cache` with `variants` under one commit; refs vN for `versions`."""
    org, repo = repo_id.split("/")
    commit = hashlib.sha1(f"{repo_id}:{','.join(sorted(variants))}".encode()).hexdigest()
    base = cache / f"kernels--{org}--{repo}"
    (base / "refs").mkdir(parents=True, exist_ok=True)
    for v in versions:
        (base / "refs" / f"v{v}").write_text(commit)
    for variant in variants:
        write_variant(base / "snapshots" / commit / "build", name or repo, variant)
    return commit


def local_repo(folder: Path, variants: list[str], name: str = "tiny-norm") -> Path:
    """A LOCAL_KERNELS folder: FOLDER/build/VARIANT/..."""
    for variant in variants:
        write_variant(folder / "build", name, variant)
    return folder


# The dispatch files of the Kernel Hub fla build (kernels-community/fla v3), in the layout the Hub records for it:
# a backend registry, the fla#640 guard on the gated chunk backward, a TileLang backend whose is_available() only
# imports tilelang (no nvcc check), no FlashQLA backend. Only what kernelcheck's fla reader reads; the real build
# also holds the Triton kernels. A CPU test (and benchmarks/gpu/gpu_dispatchers.sh, which cannot fetch the real build)
# lays this into a cached variant folder.
FLA_HUB_FILES = {
    "backends.py": '''import os


class BackendRegistry:
    """fla's backend registry; FLA_DISABLE_BACKEND_DISPATCH=1 bypasses it."""

    disabled = os.environ.get("FLA_DISABLE_BACKEND_DISPATCH", "0") == "1"
''',
    "ops/common/chunk_o.py": '''from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
from fla.backends import dispatch


@dispatch('common')
def chunk_bwd_dqkwg(q, k, v, g=None, **kwargs):
    if g is not None and IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1:
        raise RuntimeError("fla#640: the Triton gated chunk backward is wrong on Hopper with this triton")
''',
    "ops/common/backends/tilelang/__init__.py": '''from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0


class TileLangBackend:
    default_enable = IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0

    @classmethod
    def is_available(cls):
        try:
            import tilelang  # noqa: F401
        except ImportError:
            return False
        return True


def chunk_bwd_dqkwg(q, k, v, g=None, **kwargs):
    raise NotImplementedError
''',
}


def write_fla_build(variant_dir: Path) -> Path:
    """Lay the Hub fla build's dispatch files (FLA_HUB_FILES) into a variant folder (kernels' flat layout)."""
    for rel, text in FLA_HUB_FILES.items():
        f = variant_dir / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return variant_dir
