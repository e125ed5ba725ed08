"""Print kernelcheck's reading of the transformers Hub mapping next to transformers' own mapping objects.

Proves that `transformers_hub.transformers_hub(m=...)` reads the mapping, the kernels window and the `use_kernels`
default from the installed transformers: run it with a transformers whose window accepts the installed
kernels (so `get_kernel_mapping_transformers()` exists). No arguments; prints one JSON object:
`equal` (the two mappings are the same set), `n`, `window` / `real_window`, `met`, `use_kernels_default`,
and up to five `missing` / `extra` entries for a failure message.
"""

from __future__ import annotations

import json

from transformers.integrations import hub_kernels
from transformers.utils import import_utils

from kernelcheck.core import matrix
from kernelcheck.integrations.transformers_hub import transformers_hub

Entry = tuple[str, str, str, str, object, object]


def theirs_of(real: dict) -> set[Entry]:
    """transformers' mapping {name: {device: repo | {mode: repo}}} as flat entries."""
    theirs: set[Entry] = set()
    for name, per_dev in real.items():
        for dev, repos in per_dev.items():
            dtype = dev if isinstance(dev, str) else dev.type
            for repo in repos.values() if isinstance(repos, dict) else [repos]:
                theirs.add((name, dtype, repo._repo_id, repo.layer_name, repo._version, repo._revision))
    return theirs


def main() -> None:
    real = hub_kernels.get_kernel_mapping_transformers()
    th = transformers_hub(m=matrix.load())
    mine: set[Entry] = {
        (e.name, e.device, e.repo.repo_id, e.repo.layer_name, e.repo.version, e.repo.revision) for e in th.mapping
    }
    theirs = theirs_of(real)
    print(json.dumps({
        "equal": mine == theirs, "n": len(mine), "window": list(th.window) if th.window else None,
        "real_window": [import_utils.KERNELS_MIN_VERSION, import_utils.KERNELS_MAX_VERSION],
        "met": th.window_met, "use_kernels_default": th.use_kernels_default,
        "missing": sorted(map(str, theirs - mine))[:5], "extra": sorted(map(str, mine - theirs))[:5],
    }))


if __name__ == "__main__":
    main()
