"""Ask kernelcheck's kernels adapter and the real `kernels` release on PYTHONPATH the same questions.

Usage: `kernels_api_probe.py WORKDIR`. WORKDIR gets a LOCAL_KERNELS-style folder of build variants and an HF cache
holding one kernel repository (tests/kernel_repos.py: kernels' real cache layout, pure-Python builds). Prints one
JSON object: the adapter's answers (generation, decisions here and for torch 2.11 + CUDA 13.0, metadata, arch
check, cached versions, kernels' offline error for a repository that is not cached, cache dir, bytecode patterns,
mode order) next to what the real kernels does with the same files (`get_local_kernel` picks a variant; the lock the
adapter wrote is loaded with `kernels.load_kernel(..., lockfile=)`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

VARIANTS = ["torch29-cxx11-cu126-x86_64-linux", "torch211-cxx11-cu130-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux",
            "torch-universal", "torch-cuda"]


def main() -> None:
    work = Path(sys.argv[1])
    os.environ["HF_HUB_CACHE"] = str(work / "hf")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("KERNELS_CACHE", None)
    from kernelcheck.integrations.kernels_api import KernelsApi, System, adapter
    from tests.kernel_repos import cache_repo, local_repo

    local = local_repo(work / "local", VARIANTS, name="probe")
    commit = cache_repo(work / "hf", "kernels-community/probe", VARIANTS, versions=(1, 3), name="probe")
    import kernels

    a = adapter()
    assert isinstance(a, KernelsApi), a
    here = a.resolve(a.list_local(local / "build"))
    target = a.resolve(a.list_local(local / "build"), System(torch=(2, 11), cuda=(13, 0)))
    meta = a.read_metadata(local / "build" / VARIANTS[1] / "metadata.json")
    supports = a.capability_check()
    lock = work / "kernels.lock"
    lock.write_text(a.lock_text([("kernels-community/probe", 3, None, commit)]))
    by_lock = kernels.load_kernel("kernels-community/probe", lockfile=lock)
    real = kernels.get_local_kernel(local)
    from kernels import Mode

    print(json.dumps({
        "kernels": kernels.__version__, "generation": a.generation, "newer": a.newer_than_known,
        "here": [[d.info.variant, d.accepted, d.reason] for d in here],
        "here_kinds": {d.info.variant: [d.info.kind, d.info.framework, d.info.backend] for d in here},
        "target": [[d.info.variant, d.accepted, d.reason] for d in target],
        "real_local_file": real.__file__,
        "meta": [meta.kernels_minver, meta.backend, list(meta.archs)],
        "supports": None if supports is None else [supports(list(meta.archs), cap) for cap in ((9, 0), (12, 0))],
        "cached_versions": {str(k): v for k, v in a.cached_versions("kernels-community/probe").items()},
        "commit": commit,
        "offline_error": a.offline_version_error("kernels-community/absent", 3),
        "offline_ok": a.offline_version_error("kernels-community/probe", 3),
        "cache_dir": a.cache_dir(), "bytecode": a.bytecode_ignore_patterns(),
        "lock_loaded_file": by_lock.__file__,
        "train_modes": [str(m) for m in a.mode_priority()[Mode.TRAINING]],
    }))


if __name__ == "__main__":
    main()
