"""matrix/models.toml's families say what each model type's layers call: for every type whose modeling module the
installed transformers ships, its family lists exactly the functions that module decorates with
`use_kernel_func_from_hub_with_fallback` (read from the source, nothing imported). `kernelcheck models`, verify's
layer and the Hub prefetch read the family; doctor adds what the module decorates beyond it."""

from __future__ import annotations

from kernelcheck.core import matrix as matrix_mod
from kernelcheck.integrations import transformers as tf
from kernelcheck.integrations import transformers_models


def _decorated(module: str, m: matrix_mod.Matrix) -> set[str] | None:
    read = tf.read_static(module)
    if read is None:
        return None
    misnamed = {e["registered"]: e["function"] for e in m.transformers.get("misnamed", [])}
    return {misnamed.get(d.registered, d.registered) for d in read.decorated}


def test_every_family_lists_what_the_installed_modeling_module_decorates() -> None:
    assert tf.detect_regime() == "decorator"  # the pinned (5.24) and the newest (5.25) transformers
    m = matrix_mod.load()
    installed = transformers_models.installed_version()
    types = {n: t.at(installed) for n, t in m.model_types.items()}  # as the installed transformers builds them
    read = {n: _decorated(t.module, m) for n, t in types.items()}
    assert read["zamba"] is not None and read["mamba"] is not None  # the modules are there to be read
    wrong = {n: (t.family, sorted(set(t.functions)), sorted(read[n] or ()))
             for n, t in types.items() if read[n] is not None and set(t.functions) != read[n]}
    assert wrong == {}, "model type: (family, its functions, what the modeling module decorates)"


def test_zamba_is_a_mamba1_scan_without_the_fused_inner_function() -> None:
    zamba = matrix_mod.load().model_types["zamba"]
    assert zamba.family == "mamba1_scan"
    assert zamba.functions == ("selective_scan_fn", "selective_state_update", "causal_conv1d_fn",
                               "causal_conv1d_update")
    assert "mamba_inner_fn" in matrix_mod.load().model_types["mamba"].functions  # the fused one is Mamba's


def test_falcon_mamba_and_jamba_call_the_fused_inner_function_only_before_transformers_5_25() -> None:
    m = matrix_mod.load()
    for name in ("falcon_mamba", "jamba"):
        t = m.model_types[name]
        assert "mamba_inner_fn" in t.at("5.24.0").functions and t.at("5.24.0").family == "mamba1"
        assert "mamba_inner_fn" not in t.at("5.25.0").functions and t.at("5.25.0").family == "mamba1_scan"
        assert t.at("5.26.0.dev0") == t.at("5.25.0") == t.at(None) == t  # newest, or no transformers: current
    assert m.model_types["mamba"].at("5.25.0").functions == m.model_types["mamba"].functions  # Mamba keeps it


def test_a_resolved_model_is_the_type_the_installed_transformers_builds(monkeypatch) -> None:
    monkeypatch.setattr(transformers_models, "installed_version", lambda: "5.24.0")
    assert "mamba_inner_fn" in transformers_models.resolve("falcon_mamba", m=matrix_mod.load()).spec.functions
    monkeypatch.setattr(transformers_models, "installed_version", lambda: "5.25.0")
    assert "mamba_inner_fn" not in transformers_models.resolve("falcon_mamba", m=matrix_mod.load()).spec.functions


def test_a_bad_earlier_entry_is_bad_input_naming_the_type() -> None:
    import pytest

    from kernelcheck.core import model_history
    from kernelcheck.core.errors import BadInput

    def bad(what: str) -> Exception:
        return BadInput(f"[model_types.jamba] earlier: {what}")

    fams = matrix_mod.load().families
    with pytest.raises(BadInput, match="jamba"):
        model_history.earlier_from([{"before": "5.25.0", "family": "nope"}], fams, bad)
    with pytest.raises(BadInput, match="not a version"):
        model_history.earlier_from([{"before": "soon", "family": "mamba1"}], fams, bad)
    two = model_history.earlier_from([{"before": "5.25.0", "family": "mamba1_scan"},
                                      {"before": "5.20.0", "family": "mamba1"}], fams, bad)
    assert model_history.family_at(two, "5.19.1")[0] == "mamba1"  # the oldest entry that holds wins
    assert model_history.family_at(two, "5.24.0")[0] == "mamba1_scan"
    assert model_history.family_at(two, "5.25.0") is None and model_history.family_at(two, "garbage") is None
