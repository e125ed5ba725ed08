"""Build a model's real transformers layers from its config, with random weights (never a download).

Two shapes, both through the model's own classes (`AutoModelForCausalLM.from_config`), so the same
modeling code and the same kernel calls run as in the real model:
- tiny: the config shrunk with matrix/verify.toml's field table (transformers' own field names) and cut
  to one layer of each type. Seconds on a CPU.
- full: the real config cut to one layer of each type, vocabulary reduced (it is not a layer):
  e.g. the 27B Gated DeltaNet layer at hidden 5120, 16 key / 48 value heads, head dim 128.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from kernelcheck.core import matrix
from kernelcheck.core.errors import KernelcheckError
from kernelcheck.core.models import ResolvedModel

# Config keys that describe the file, not the architecture; passing them back to a config class is noise.
_DROP = ("_kernelcheck_note", "architectures", "transformers_version", "torch_dtype", "dtype", "auto_map",
         "_name_or_path", "model_type")


@dataclass(frozen=True)
class BuiltModel:
    """A real model instance plus what was built, for the report."""

    model: Any  # torch.nn.Module (a *ForCausalLM)
    model_type: str
    model_class: str
    shape: str
    layer_types: tuple[str, ...]
    device: str
    dtype: str
    parameters: int
    overrides: dict[str, Any] = field(default_factory=dict)
    attn_implementation: str = "sdpa"
    cache_kwarg: str = "past_key_values"  # transformers >= 5.24 renamed it to `cache`; <= 5.14 Mamba: `cache_params`

    def to_json(self) -> dict[str, Any]:
        return {"model_type": self.model_type, "class": self.model_class, "shape": self.shape,
                "layers": list(self.layer_types), "device": self.device, "dtype": self.dtype,
                "parameters": self.parameters, "overrides": self.overrides,
                "attn_implementation": self.attn_implementation}


def verify_data(*, m: matrix.Matrix) -> dict[str, Any]:
    """`m`'s verify.toml (tiny-shape field table, token defaults, tolerances, benchmark settings)."""
    return m.table("verify.toml")


def text_config(model: ResolvedModel) -> tuple[str, dict[str, Any]]:
    """(model_type, fields) of the part of the config the causal-LM class is built from."""
    cfg = model.config
    text = cfg.get("text_config")
    if isinstance(text, dict) and text.get("model_type"):
        mt, d = text["model_type"], dict(text)
    elif model.spec.text_model_type and isinstance(text, dict):
        mt, d = model.spec.text_model_type, dict(text)
    else:
        mt, d = cfg.get("model_type") or model.model_type, dict(cfg)
    for k in _DROP:
        d.pop(k, None)
    d.pop("text_config", None)
    d.pop("vision_config", None)
    return mt, d


def _one_of_each(layer_types: list[str]) -> list[str]:
    return list(dict.fromkeys(layer_types))


def _per_layer_lists(have: dict[str, Any], types: list[str], keep: list[str]) -> dict[str, list[Any]]:
    """Other per-layer lists (mlp_layer_types of glm5_next and inkling: one entry per layer, checked against
    num_hidden_layers) cut to the layers kept: the entries of the first layer of each kept type."""
    idx = [types.index(t) for t in keep]
    return {k: [v[i] for i in idx] for k, v in have.items()
            if k != "layer_types" and isinstance(v, list) and len(v) == len(types) and len(types) > len(keep)}


def shaped_config(model: ResolvedModel, shape: str, *, m: matrix.Matrix) -> tuple[Any, dict[str, Any]]:
    """The transformers config object for `shape`, and the overrides applied to the real config."""
    from transformers import AutoConfig

    mt, fields = text_config(model)
    try:
        real = AutoConfig.for_model(mt, **fields)
    except Exception as exc:  # noqa: BLE001 - the installed transformers cannot read this config
        raise KernelcheckError(f"transformers cannot build a `{mt}` config from {model.query}'s config.json "
                               f"({type(exc).__name__}: {exc}). Is the installed transformers older than the "
                               "model?") from None
    sub = getattr(real, "text_config", None)
    if sub is not None and hasattr(sub, "to_dict") and getattr(sub, "model_type", None):
        # A composite config (qwen3_5_moe, ...): the causal LM is built from its text part.
        mt, fields = sub.model_type, {k: v for k, v in sub.to_dict().items() if k not in _DROP}
        real = sub
    have = real.to_dict()
    data = verify_data(m=m)
    overrides: dict[str, Any] = {}
    per_type = data["tiny"].get("model_types", {}).get(mt, {})
    if shape == "tiny":
        overrides.update({k: v for k, v in data["tiny"]["fields"].items() if k in have and have[k] is not None})
        overrides.update(per_type.get("fields", {}))
    else:
        overrides.update({k: v for k, v in data["full"].items() if k in have})
    vocab = overrides.get("vocab_size", have.get("vocab_size"))
    for key in data["tiny"].get("token_id_fields", []):
        # special token ids of the real vocabulary must stay inside the shrunk one (embedding padding_idx)
        v = have.get(key)
        if isinstance(vocab, int) and isinstance(v, int) and v >= vocab:
            overrides[key] = vocab - 1
        elif isinstance(vocab, int) and isinstance(v, list) and any(isinstance(x, int) and x >= vocab for x in v):
            overrides[key] = [min(x, vocab - 1) for x in v]
    types = have.get("layer_types")
    fixed = per_type.get("fields", {}).get("layer_types") if shape == "tiny" else None
    if fixed:  # the type's default config has no usable mix (all attention, or a list its own init rebuilds)
        overrides["layer_types"] = list(fixed)
        overrides["num_hidden_layers"] = len(fixed)
    elif isinstance(types, list) and types:
        keep = _one_of_each(types)
        overrides["layer_types"] = keep
        overrides["num_hidden_layers"] = len(keep)
        overrides.update(_per_layer_lists(have, types, keep))
    else:
        overrides["num_hidden_layers"] = int(per_type.get("layers", 2))
    try:
        cfg = AutoConfig.for_model(mt, **{**fields, **overrides})
    except Exception as exc:  # noqa: BLE001
        raise KernelcheckError(f"could not shrink the `{mt}` config to the {shape} shape ({type(exc).__name__}: "
                               f"{exc}); add the family's fields to matrix/verify.toml [tiny.fields].") from None
    return cfg, overrides


def build(model: ResolvedModel, shape: str, device: str, dtype_name: str,
          attn_implementation: str | None, *, m: matrix.Matrix) -> BuiltModel:
    """Instantiate the real causal-LM class on `device` with random weights (seeded). `attn_implementation`
    None leaves transformers' default for the class (sdpa where supported, eager for Mamba)."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg, overrides = shaped_config(model, shape, m=m)
    dtype = getattr(torch, dtype_name)
    kwargs: dict[str, Any] = {"dtype": dtype}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    limit = int(verify_data(m=m)["tiny"].get("max_parameters", 0))
    if shape == "tiny" and limit:
        # Count on the meta device first: a config field missing from the tiny table must not make the
        # "tiny" model real-size (out of memory on a CI runner).
        try:
            with torch.device("meta"):
                n = sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg, **kwargs).parameters())  # type: ignore[no-untyped-call]  # transformers: unannotated
        except Exception:  # noqa: BLE001 - the real build below reports the error
            n = 0
        if n > limit:
            raise KernelcheckError(f"the tiny {type(cfg).__name__} would still have {n / 1e6:.0f} M parameters "
                                   f"(limit {limit / 1e6:.0f} M): some size fields of this family are not in "
                                   "matrix/verify.toml [tiny.fields]. Add them there.")
    torch.manual_seed(0)
    try:
        with torch.device(device):
            lm = AutoModelForCausalLM.from_config(cfg, **kwargs)  # type: ignore[no-untyped-call]  # transformers: unannotated
    except Exception as exc:  # noqa: BLE001
        raise KernelcheckError(f"could not build {type(cfg).__name__} ({shape} shape) as a causal LM: "
                               f"{type(exc).__name__}: {exc}") from None
    lm.to(device)
    types = tuple(getattr(cfg, "layer_types", None) or ()) or tuple(
        type(layer).__name__ for layer in _decoder_layers(lm))
    params = sum(p.numel() for p in lm.parameters())
    sig = inspect.signature(lm.forward).parameters
    return BuiltModel(lm, getattr(cfg, "model_type", model.model_type), type(lm).__name__, shape, types, device,
                      dtype_name, params, overrides, getattr(lm.config, "_attn_implementation", None) or "default",
                      next((k for k in ("cache", "past_key_values", "cache_params") if k in sig), "past_key_values"))


def _decoder_layers(lm: Any) -> list[Any]:
    base = getattr(lm, "model", None) or getattr(lm, "backbone", None) or lm
    layers = getattr(base, "layers", None)
    return list(layers) if layers is not None else []


def layer_modules(lm: Any, class_name: str) -> list[Any]:
    """Modules of `class_name` in the model (e.g. Qwen3_5GatedDeltaNet), in order."""
    if not class_name:
        return []
    return [m for m in lm.modules() if type(m).__name__ == class_name]
