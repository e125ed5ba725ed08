"""kernels 0.17: `kernels._rust` (Metadata, locks), `kernels.hf_hub` (CACHE_DIR computed at import, _get_hf_api),
`kernels.resolver._BYTECODE_IGNORE_PATTERNS`, `kernels.archs`. The base adapter is this layout."""

from __future__ import annotations

from kernelcheck.integrations.kernels_api.base import KernelsApi


class Gen017(KernelsApi):
    generation = "0.17"

    def cache_dir(self) -> str | None:
        hf = self.module("hf_hub")
        return getattr(hf, "CACHE_DIR", None)  # 0.17 reads KERNELS_CACHE once, at import
