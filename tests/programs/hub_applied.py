"""After loading: was the Hub kernel really applied to a tiny Qwen3.5 model?

Builds a two-layer Qwen3_5ForCausalLM from a config (no weights), maps RMSNormGated and
chunk_gated_delta_rule to the test kernel repo `kc-test/tiny-norm` (tests/kernel_repos.py: its layer doubles
the input) and turns kernels on with transformers' own `set_use_kernels(True)`. Proves that
`kernels_prefetch.applied_kernels` tells an applied kernel from a torch forward kept silently.
No arguments (the cache comes from HF_HUB_CACHE). Prints one JSON object: `rows` (applied_kernels rows by
name), `error` (what set_use_kernels raised, or null), `norm_out` (the gated norm's mean output on ones with a
zero gate: 2.0 from the Hub test layer, 0.0 from torch) and `lines` (the text report).
"""

from __future__ import annotations

import json

import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

from kernelcheck.integrations import kernels_prefetch as hub

EXPECTED = {"RMSNormGated", "chunk_gated_delta_rule"}


def tiny_model() -> Qwen3_5ForCausalLM:
    cfg = Qwen3_5TextConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"])
    return Qwen3_5ForCausalLM(cfg).eval()


def use_test_kernels(model: Qwen3_5ForCausalLM) -> str | None:
    """transformers' own path (its mapping + kernelize(fallback=ALL)); returns what it raised, if anything."""
    try:
        from kernels import LayerRepository, use_kernel_mapping

        mapping = {
            "RMSNormGated": {"cpu": LayerRepository("kc-test/tiny-norm", layer_name="TinyRMSNormGated", version=1)},
            "chunk_gated_delta_rule": {
                "cpu": LayerRepository("kc-test/tiny-norm", layer_name="chunk_gated_delta_rule", version=1)},
        }
        with use_kernel_mapping(mapping):
            model.set_use_kernels(True)
    except Exception as exc:  # noqa: BLE001 - the outcome under test: reported, never raised
        return f"{type(exc).__name__}: {exc}"
    return None


def main() -> None:
    model = tiny_model()
    error = use_test_kernels(model)
    rows = hub.applied_kernels(model, expected=EXPECTED)
    norm = model.model.layers[0].linear_attn.norm
    n = norm.weight.shape[0]
    x = torch.ones(1, n)
    print(json.dumps({"rows": {r["name"]: r for r in rows}, "error": error,
                      "norm_out": float(norm(x, torch.zeros(1, n)).sum()) / n,
                      "lines": hub.applied_lines(rows, getattr(model, "use_kernels", None))}))


if __name__ == "__main__":
    main()
