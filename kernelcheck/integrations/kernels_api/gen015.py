"""kernels 0.15-0.16: no `kernels._rust` (metadata from `kernels_data`, the public `kernels.Metadata`), helpers in
`kernels.utils`, a JSON-list lock of {repo_id, sha, variants}, a version lookup that reads HF_HUB_OFFLINE itself."""

from __future__ import annotations

import json
from typing import Any

from kernelcheck.integrations.kernels_api.base import KernelsApi


class Gen015(KernelsApi):
    generation = "0.15"

    def capability_check(self) -> None:
        return None  # 0.15 has no arch validator: a CUDA build for another GPU fails at its first launch

    def offline_version_error(self, repo_id: str, version: int) -> str | None:
        from huggingface_hub import constants

        if not constants.HF_HUB_OFFLINE:  # online, 0.15's lookup asks the Hub: doctor never calls it then
            return None
        try:
            self.name("_versions", "resolve_version_spec_as_ref")(repo_id, version)
        except ValueError as exc:
            return str(exc)
        return None

    def cache_dir(self) -> str | None:
        found: str | None = self.name("utils", "_get_cache_dir")()
        return found

    def bytecode_ignore_patterns(self) -> list[str]:
        return []  # 0.15 downloads a variant folder whole

    def lock_text(self, pins: list[tuple[str, int | None, str | None, str]]) -> str:
        """0.15's `kernels.lock`: [{repo_id, sha, variants}] (kernels.lockfile.KernelLock.from_json); kernelcheck
        pins the commit, which is what `load_kernel(..., lockfile=)` reads."""
        return json.dumps([{"repo_id": repo_id, "sha": commit, "variants": {}} for repo_id, _, _, commit in pins],
                          indent=2)

    def hf_api(self) -> Any:
        return self.name("utils", "_get_hf_api")()
