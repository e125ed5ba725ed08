"""Write a Hugging Face cache with stand-in builds of kernels-community/fla v3 and kernels-community/mamba-ssm v5,
for a machine with no network (the real builds cannot be fetched there), in kernels' real cache layout
(tests/kernel_repos.py: kernels--ORG--NAME/refs/vN, snapshots/COMMIT/build/VARIANT).

Each build is pure Python. Its layers have the names transformers 5.25's mapping asks for and the exact forward
signatures kernels checks (copied from transformers' own functions and classes), and each calls transformers' own
implementation behind the Hub name (the function transformers' wrapper calls: the pip package where it runs on the
input's device, else torch), so a job that loads with use_kernels (5.25's default) loads, kernelizes and trains. The fla
build also carries the dispatch files the Hub records for kernels-community/fla v3 (tests/kernel_repos.py
FLA_HUB_FILES: TileLang available when tilelang imports, no nvcc check, the fla#640 guard, no FlashQLA), so
`kernelcheck doctor` reads them as it reads the real build's. What the real build's kernels do on the GPU (Triton,
the TileLang JIT crash without nvcc: fla#949) is NOT reproduced by these builds; only what runs where, and what
doctor and kernels' own record (get_kernelized_layers) say about it.

Usage: python benchmarks/hub_standin_cache.py CACHE_DIR [VARIANT]   (VARIANT default: this torch's, e.g.
torch211-cxx11-cu130-x86_64-linux). Prints the variant and the fla build's folder.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kernel_repos import write_fla_build

MODULE = "transformers.models.qwen3_5.modeling_qwen3_5"
LAYERS = '''"""Stand-in layers (benchmarks/hub_standin_cache.py): transformers' own torch code behind the Hub names."""
import importlib
import inspect

import torch

_m = importlib.import_module({module!r})


def _target(spec):
    obj = _m
    for part in spec.split("."):
        obj = getattr(obj, part)
    return obj


def _layer(name, spec, method):
    ref = _target(spec)
    if isinstance(ref, torch.nn.Module):  # a function transformers wraps in a Func module: its class's forward
        sig = inspect.signature(type(ref).forward)
        # the function the Func module wraps (calling the module itself would dispatch back to this layer)
        inner = inspect.getclosurevars(type(ref).forward).nonlocals["func"]

        def forward(self, *args, **kwargs):
            return inner(*args, **kwargs)
    else:
        fn = getattr(ref, "__wrapped__", ref)
        sig = inspect.signature(fn)
        if not method:
            sig = sig.replace(parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                                          *sig.parameters.values()])

        def forward(self, *args, **kwargs):
            return fn(self, *args, **kwargs) if method else fn(*args, **kwargs)

    forward.__signature__ = sig
    return type(name, (torch.nn.Module,), {{"forward": forward, "__module__": __name__}})


for _name, _spec, _method in {entries!r}:
    globals()[_name] = _layer(_name, _spec, _method)
'''

FLA = [("chunk_gated_delta_rule", "torch_chunk_gated_delta_rule", False),
       ("recurrent_gated_delta_rule", "torch_recurrent_gated_delta_rule", False),
       ("FusedRMSNormGated", "Qwen3_5RMSNormGated.forward", True)]
MAMBA = [("causal_conv1d_fn", "causal_conv1d_fn", False), ("causal_conv1d_update", "causal_conv1d_update", False)]


def _variant() -> str:
    import platform

    import torch

    v = torch.__version__.split("+")[0].split(".")
    cu = torch.version.cuda
    dev = f"cu{cu.replace('.', '')}" if cu else "cpu"
    return f"torch{v[0]}{v[1]}-cxx11-{dev}-{platform.machine()}-linux"


def write(cache: Path, repo_id: str, versions: tuple[int, ...], variant: str, entries: list) -> Path:
    org, name = repo_id.split("/")
    commit = hashlib.sha1(f"standin:{repo_id}:{variant}".encode()).hexdigest()
    base = cache / f"kernels--{org}--{name}"
    (base / "refs").mkdir(parents=True, exist_ok=True)
    for v in versions:
        (base / "refs" / f"v{v}").write_text(commit)
    d = base / "snapshots" / commit / "build" / variant
    d.mkdir(parents=True, exist_ok=True)
    backend = {"type": "cuda", "archs": ["8.0", "9.0", "10.0"]} if "-cu" in variant else {"type": "cpu"}
    ident = f"_{name.replace('-', '_')}_{hashlib.sha1(str(d).encode()).hexdigest()[:10]}"
    (d / "metadata.json").write_text(json.dumps({"id": ident, "name": name, "version": 1, "license": "apache-2.0",
                                                 "python-depends": [], "backend": backend}))
    (d / "__init__.py").write_text("from . import layers\n\n__all__ = ['layers']\n")
    (d / "layers.py").write_text(LAYERS.format(module=MODULE, entries=entries))
    return d


def main(argv: list[str]) -> int:
    cache = Path(argv[0])
    variant = argv[1] if len(argv) > 1 else _variant()
    fla = write(cache, "kernels-community/fla", (3,), variant, FLA)
    write_fla_build(fla)
    write(cache, "kernels-community/mamba-ssm", (5,), variant, MAMBA)
    print(variant)
    print(fla)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
