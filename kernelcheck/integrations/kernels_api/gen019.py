"""kernels 0.19: every module under `kernels._internals` (`kernels.variants` no longer exists), `kernels.Metadata`
public again, variants carry a Python ABI and a `system` (`ArchVariant(framework, backend, python, system)`), SDK
variants, and the resolver takes the interpreter's Python version."""

from __future__ import annotations

from typing import Any

from kernelcheck.integrations.kernels_api.base import VariantInfo
from kernelcheck.integrations.kernels_api.gen018 import Gen018


class Gen019(Gen018):
    generation = "0.19"
    prefix = "kernels._internals"

    def describe(self, v: Any) -> VariantInfo:
        kind = type(v).__name__
        if kind == "NoarchVariant":
            return VariantInfo(v.variant_str, "noarch", backend=v.backend.backend_name)
        system = getattr(v, "system", None)
        plat, os_ = (system.platform, system.os) if system is not None else (None, None)
        if kind == "SdkVariant":
            b = v.backend
            name = "" if b is None else getattr(b, "backend_name", None) or b.name
            return VariantInfo(v.variant_str, "sdk", backend=name, platform=plat, os=os_)
        return self._arch_info(v, v.backend, plat, os_)
