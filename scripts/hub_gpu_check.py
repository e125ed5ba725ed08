"""GPU check for the Kernel Hub part: kernelcheck's resolution vs the real `kernels`, on a CUDA torch and a real GPU.

Run on the GPU machine (no network needed; kernel repos are written on disk, HF_HUB_OFFLINE=1):

    pip install --no-index --no-deps --target /tmp/site wheels/kernels-0.17.2-*.whl
    PYTHONPATH=/tmp/site:. python scripts/hub_gpu_check.py

It builds two tiny pure-Python kernel repos in a temporary HF cache, named as kernels names CUDA builds for
the installed torch (torch{MAJ}{MIN}-cxx11-cu{XY}-x86_64-linux), plus decoys (a newer CUDA minor, an older
torch), and one repo whose only matching build declares an arch this GPU lacks. For each repo it compares
kernelcheck.hub.resolve_repo (chosen variant, arch problem) with kernels.get_kernel, and kernelizes a tiny
layer on cuda to check the applied/raised claims. Prints JSON; exit 0 iff kernelcheck and kernels agree.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

CACHE = Path(tempfile.mkdtemp(prefix="kc-hub-gpu-"))
os.environ["HF_HUB_CACHE"] = str(CACHE)
os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from kernel_repos import write_variant  # noqa: E402


def repo(repo_id: str, variants: dict[str, dict]) -> None:
    import hashlib

    org, name = repo_id.split("/")
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    base = CACHE / f"kernels--{org}--{name}"
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "v1").write_text(commit)
    for v, backend in variants.items():
        write_variant(base / "snapshots" / commit / "build", name, v, backend)


def main() -> int:
    tv = torch.__version__.split("+")[0].split(".")
    maj, mnr = int(tv[0]), int(tv[1])
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    cuda = torch.version.cuda
    out: dict = {"torch": torch.__version__, "cuda": cuda, "gpu": None, "checks": []}
    if cuda is None or not torch.cuda.is_available():
        print(json.dumps({**out, "error": "needs a CUDA torch and a visible GPU"}))
        return 2
    cmaj, cmin = (int(x) for x in cuda.split(".")[:2])
    cap = torch.cuda.get_device_capability()
    out["gpu"] = f"{torch.cuda.get_device_name()} sm_{cap[0]}{cap[1]}"
    good = f"torch{maj}{mnr}-{abi}-cu{cmaj}{cmin}-x86_64-linux"
    newer = f"torch{maj}{mnr}-{abi}-cu{cmaj}{cmin + 1}-x86_64-linux"
    older_torch = f"torch{maj}{mnr - 1}-{abi}-cu{cmaj}{cmin}-x86_64-linux"
    here = {"type": "cuda", "archs": [f"{cap[0]}.{cap[1]}"]}
    other = {"type": "cuda", "archs": ["7.5"] if cap[0] >= 8 else ["10.0"]}
    repo("kc-test/gpu-norm", {good: here, newer: here, older_torch: here})
    repo("kc-test/gpu-norm-arch", {good: other})

    from kernelcheck.core import environment, matrix
    from kernelcheck.integrations import kernels_hub as hub

    env = environment.probe(m=matrix.load(), packages=False)
    import kernels

    ok = True
    for rid, expect_ok in (("kc-test/gpu-norm", True), ("kc-test/gpu-norm-arch", False)):
        res = hub.resolve_repo(rid, version=1, env=env)
        try:
            mod = kernels.get_kernel(rid, version=1, trust_remote_code=True)
            k = {"loaded": True, "variant": Path(mod.__file__).parent.name}
        except Exception as exc:  # noqa: BLE001
            k = {"loaded": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
        agree = (res.chosen == k.get("variant") and res.problem is None) if k["loaded"] else \
            (res.problem is not None or res.chosen is None)
        agree = agree and (k["loaded"] == expect_ok)
        ok &= agree
        out["checks"].append({"repo": rid, "kernelcheck": {"chosen": res.chosen, "problem": res.problem,
                                                             "decisions": [(d.variant, d.accepted, d.reason)
                                                                           for d in res.decisions]},
                              "kernels": k, "agree": agree})

    # kernelize a layer on cuda: matching build -> applied; arch mismatch -> kernels raises (not silent)
    from kernels import LayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping

    @use_kernel_forward_from_hub("TinyRMSNormGated")
    class Norm(torch.nn.Module):
        def forward(self, hidden_states, gate):
            return hidden_states

    for rid, expect in (("kc-test/gpu-norm", "applied"), ("kc-test/gpu-norm-arch", "raises")):
        model = torch.nn.Sequential(Norm()).cuda()
        mapping = {"TinyRMSNormGated": {"cuda": LayerRepository(rid, layer_name="TinyRMSNormGated", version=1)}}
        try:
            with use_kernel_mapping(mapping, inherit_mapping=False):
                kernelize(model, mode=Mode.INFERENCE, device="cuda", use_fallback=kernels.KernelizeFallback.ALL)
            rows = hub.applied_kernels(model)
            got = rows[0]["status"] if rows else "none"
        except Exception as exc:  # noqa: BLE001
            got = "raises"
            out.setdefault("kernelize_errors", {})[rid] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        out["checks"].append({"kernelize": rid, "expected": expect, "got": got, "agree": got == expect})
        ok &= got == expect
    out["ok"] = ok
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
