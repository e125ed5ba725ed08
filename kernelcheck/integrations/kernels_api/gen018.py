"""kernels 0.18: `kernels.hf_hub.CACHE_DIR` is gone (`_get_cache_dir()` reads KERNELS_CACHE per call), commits are
`_rust.Oid`, refs written into the cache on download (`_versions._record_ref_in_cache`)."""

from __future__ import annotations

from kernelcheck.integrations.kernels_api.base import KernelsApi


class Gen018(KernelsApi):
    generation = "0.18"

    def cache_dir(self) -> str | None:
        found: str | None = self.name("hf_hub", "_get_cache_dir")()
        return found
