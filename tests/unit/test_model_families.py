"""matrix/models.toml's families say what each model type's layers call: for every type whose modeling module the
installed transformers ships, its family lists exactly the functions that module decorates with
`use_kernel_func_from_hub_with_fallback` (read from the source, nothing imported). `kernelcheck models`, verify's
layer and the Hub prefetch read the family; doctor adds what the module decorates beyond it."""

from __future__ import annotations

from kernelcheck.core import matrix as matrix_mod
from kernelcheck.integrations import transformers as tf


def _decorated(module: str, m: matrix_mod.Matrix) -> set[str] | None:
    read = tf.read_static(module)
    if read is None:
        return None
    misnamed = {e["registered"]: e["function"] for e in m.transformers.get("misnamed", [])}
    return {misnamed.get(d.registered, d.registered) for d in read.decorated}


def test_every_family_lists_what_the_installed_modeling_module_decorates() -> None:
    assert tf.detect_regime() == "decorator"  # the dev environment's transformers (5.24)
    m = matrix_mod.load()
    read = {n: _decorated(t.module, m) for n, t in m.model_types.items()}
    assert read["zamba"] is not None and read["mamba"] is not None  # the modules are there to be read
    wrong = {n: (t.family, sorted(set(t.functions)), sorted(read[n] or ()))
             for n, t in m.model_types.items() if read[n] is not None and set(t.functions) != read[n]}
    assert wrong == {}, "model type: (family, its functions, what the modeling module decorates)"


def test_zamba_is_a_mamba1_scan_without_the_fused_inner_function() -> None:
    zamba = matrix_mod.load().model_types["zamba"]
    assert zamba.family == "mamba1_scan"
    assert zamba.functions == ("selective_scan_fn", "selective_state_update", "causal_conv1d_fn",
                               "causal_conv1d_update")
    assert "mamba_inner_fn" in matrix_mod.load().model_types["mamba"].functions  # the fused one is Mamba's
