"""Sub-config types and Hub hooks read from transformers' source (the CPU ground truth):

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
    assert transformers_models.tower_of("qwen3_5_vision", m=matrix.load()) == ("qwen3_5", "Qwen3_5VisionModel")
    assert transformers_models.installed_spec("qwen3_5_vision", m=matrix.load()).functions == ()
    assert transformers_models.tower_of("qwen3_5_text", m=matrix.load()) is None
    assert "chunk_gated_delta_rule" in transformers_models.installed_spec("qwen3_5_text", m=matrix.load()).functions


def test_use_kernel_func_from_hub_is_a_kernelize_hook_not_an_unread_decorator():
    src = ('@use_kernel_func_from_hub("rotary_pos_emb")\ndef apply_rotary_pos_emb(q, k, cos, sin):\n    return q, k\n'
           '\n\n@use_kernelized_func(apply_rotary_pos_emb)\nclass LlamaAttention:\n    pass\n')
    hooks = transformers_calls.hooks_of(ast.parse(src))
    assert hooks.unread == ()
    assert hooks.forward_functions == (("apply_rotary_pos_emb", "rotary_pos_emb", 1, ()),)
    # it wraps no function kernelcheck checks: no finding at all (a debug log line says so)
    assert source_notes.hook_findings("transformers.models.llama.modeling_llama", "5.13.1", hooks,
                                      matrix.load()) == []



def test_an_audio_or_vision_tower_without_an_auto_mapping_is_found_by_its_config_class():
    """inkling_audio / inkling_vision have no AutoModel entry: the model class is the one declaring
    `config: InklingAudioConfig` (its parent builds InklingAudioModel(config.audio_config)); it holds none of the
    parent's short convolutions, so doctor drops causal_conv1d_* for them."""
    for sub, cls in (("inkling_audio", "InklingAudioModel"), ("inkling_vision", "InklingVisionModel")):
        assert transformers_models.tower_of(sub, m=matrix.load()) == ("inkling_mm_model", cls)
        assert transformers_models.installed_spec(sub, m=matrix.load()).functions == ()
    src = ("class A(Base):\n    config: AConfig\n\nclass B(Base):\n    config: BConfig\n\n"
           "class B2(Base):\n    config: BConfig\n")
    classes = {n.name: n for n in ast.parse(src).body if isinstance(n, ast.ClassDef)}
    assert transformers_submodels._class_for_config(classes, "AConfig") == "A"
    assert transformers_submodels._class_for_config(classes, "BConfig") is None  # two: cannot tell
    assert transformers_submodels._class_for_config(classes, None) is None


def test_the_hub_section_of_a_tower_leaves_out_the_functions_the_report_dropped(monkeypatch):
    from kernelcheck.core.status import Finding
    from kernelcheck.doctor import submodel
    from kernelcheck.hub import check as hub_check
    from kernelcheck.report.model import Report
    from tests.environments import make_env
    from tests.unit.test_newest_stack import TH

    dropped = submodel.dropped([Finding("sub-model-without-kernels", "info", "x",
                                        functions=("causal_conv1d_update", "causal_conv1d_fn"))])
    assert dropped == ("causal_conv1d_update", "causal_conv1d_fn")
    assert submodel.dropped([Finding("no-gpu", "info", "x")]) == ()
    monkeypatch.setattr(hub_check, "transformers_hub", lambda *, m: TH)
    from kernelcheck.integrations.transformers_load import LoadName

    monkeypatch.setattr(hub_check, "hub_names", lambda model_type, module, functions: {
        n: LoadName(n, k, "x") for n, k in (("RMSNorm", "layer"), ("causal_conv1d_update", "function"),
                                            ("causal_conv1d_fn", "function"))})
    env = make_env(None, torch="2.13.0+cpu", cuda=None)
    rep = Report("doctor", None, None, "train")
    sec = hub_check.check(rep, env, "transformers.models.inkling.modeling_inkling", (), "train", device="cpu",
                          source="cache", dropped=dropped, m=matrix.load())
    assert [r.name for r in sec.names] == ["RMSNorm"]
    rep = Report("doctor", None, None, "train")
    full = hub_check.check(rep, env, "transformers.models.inkling.modeling_inkling", (), "train", device="cpu",
                           source="cache", m=matrix.load())
    assert {r.name for r in full.names} == {"RMSNorm", "causal_conv1d_update", "causal_conv1d_fn"}
