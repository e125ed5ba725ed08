"""Sub-config types and Hub hooks read from transformers' source (issue #22 item 5, the CPU ground truth):

- a vision or audio tower of a hybrid model (qwen3_5_vision) shares its parent's modeling module, but the model
  transformers builds for it holds none of the parent's fast-kernel layers: doctor lists none of them (the ground
  truth, tests/groundtruth.py, builds the tower with AutoModel and finds no module that could call one);
- transformers 5.13's @use_kernel_func_from_hub("rotary_pos_emb") is a kernelize hook, not an unknown decorator.

The source read is the installed transformers' (5.24 in CI's base) or a cached test site's (5.13.1, 5.25.0).
"""

from __future__ import annotations

import ast

from kernelcheck.core import matrix
from kernelcheck.doctor import source_notes
from kernelcheck.integrations import transformers_calls, transformers_models, transformers_submodels

GDN_FUNCTIONS = {"chunk_gated_delta_rule", "torch_chunk_gated_delta_rule", "causal_conv1d_fn"}


def test_the_vision_tower_builds_none_of_the_parents_layers_the_text_model_does():
    assert transformers_submodels.builds_any("qwen3_5_vision", "qwen3_5", {"Qwen3_5GatedDeltaNet"},
                                             GDN_FUNCTIONS) == (False, "Qwen3_5VisionModel")
    assert transformers_submodels.builds_any("qwen3_5_text", "qwen3_5", {"Qwen3_5GatedDeltaNet"},
                                             GDN_FUNCTIONS) == (True, "Qwen3_5TextModel")
    # a type with no model class in transformers' mappings: unknown, and the caller keeps the parent's needs
    assert transformers_submodels.builds_any("no_such_type", "qwen3_5", {"Qwen3_5GatedDeltaNet"},
                                             GDN_FUNCTIONS) == (None, None)


def test_sub_config_specs_get_the_parents_needs_only_where_its_layers_are_built():
    assert transformers_models.tower_of("qwen3_5_vision") == ("qwen3_5", "Qwen3_5VisionModel")
    assert transformers_models.installed_spec("qwen3_5_vision").functions == ()
    assert transformers_models.tower_of("qwen3_5_text") is None
    assert "chunk_gated_delta_rule" in transformers_models.installed_spec("qwen3_5_text").functions


def test_use_kernel_func_from_hub_is_a_kernelize_hook_not_an_unread_decorator():
    src = ('@use_kernel_func_from_hub("rotary_pos_emb")\ndef apply_rotary_pos_emb(q, k, cos, sin):\n    return q, k\n'
           '\n\n@use_kernelized_func(apply_rotary_pos_emb)\nclass LlamaAttention:\n    pass\n')
    hooks = transformers_calls.hooks_of(ast.parse(src))
    assert hooks.unread == ()
    assert hooks.forward_functions == (("apply_rotary_pos_emb", "rotary_pos_emb", 1, ()),)
    # it wraps no function kernelcheck checks: no finding at all (a debug log line says so)
    assert source_notes.hook_findings("transformers.models.llama.modeling_llama", "5.13.1", hooks,
                                      matrix.load()) == []
