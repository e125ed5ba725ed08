"""What the Hub prediction is made of: every repository a job's load resolves (`load_repositories`), and which of
them matrix/hub_offline.toml says were seen failing offline on a GPU (`confirmed_repos`): a prediction of
hub-not-listable for a device not visible here says when its repository is not among them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcheck.integrations.kernels_prefetch import LoadRepo, load_repos, modeling_module

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

__all__ = ["LoadRepo", "confirmed_repos", "load_repositories"]


def confirmed_repos(*, m: Matrix) -> frozenset[str]:
    """The repositories `m`'s hub_offline.toml lists as confirmed on a GPU."""
    return frozenset(str(e["repo"]) for e in m.table("hub_offline.toml").get("confirmed", []))


def load_repositories(query: str, *, mode: str, device: str, capability: int | None,
                      m: Matrix) -> list[LoadRepo]:
    """Every repository `from_pretrained` + `kernelize` resolve for the model `query` (a model_type, alias or Hub id)
    on `device` ("cuda", "rocm", "xpu", "cpu") at compute capability `capability` (90 for sm_90; None: no GPU to
    compare) for a job of `mode` ("train" | "infer"): one LoadRepo per layer or function and phase, with the kernels
    mode it is resolved in (INFERENCE at load; TRAINING at model.train() for train jobs). A vision or audio tower
    lists only what its own classes reach. Read from the installed transformers' source; nothing is imported or
    downloaded."""
    from kernelcheck.integrations import transformers_models

    model = transformers_models.resolve(query, m=m)
    return load_repos(modeling_module(model.spec.module), tuple(model.spec.functions), mode, device, capability,
                      model_type=model.model_type, m=m)
