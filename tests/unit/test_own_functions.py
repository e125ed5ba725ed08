"""A modeling module's own torch code under a kernel's name (transformers 5.23 lfm3) is told apart from a
function the module does not call, and from a fallback defined inside an availability branch. In-process."""

from __future__ import annotations

import ast

from kernelcheck.core import matrix as matrix_mod
from kernelcheck.integrations import transformers as tf

SOURCE = '''
def causal_conv1d_fn(x, w):
    return x

if is_causal_conv1d_available():
    from causal_conv1d import causal_conv1d_update
else:
    def causal_conv1d_update(x):
        return x

@some_decorator
def decorated(x):
    return x
'''


def test_only_top_level_undecorated_defs_are_the_modules_own() -> None:
    assert tf.own_functions(ast.parse(SOURCE)) == ("causal_conv1d_fn",)


def test_an_own_function_is_marked_and_a_missing_one_is_not() -> None:
    read = tf.StaticRead("transformers.models.lfm3.modeling_lfm3", (), False, ("causal_conv1d_fn",))
    res = tf.bindings_from_static(read, ("causal_conv1d_fn", "causal_conv1d_update"), [], m=matrix_mod.load())
    own, missing = res.bindings["causal_conv1d_fn"], res.bindings["causal_conv1d_update"]
    assert own.bound == missing.bound == "unbound"
    assert own.extra == {"defined_in_module": True} and missing.extra == {}
    assert matrix_mod.load().functions["causal_conv1d_fn"].package == own.package


def test_per_layer_lists_follow_the_layers_kept_at_the_tiny_shape() -> None:
    from kernelcheck.verify.layers import _per_layer_lists

    types = ["linear_attention", "linear_attention", "full_attention", "linear_attention"]
    have = {"layer_types": types, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
            "indexer_types": ["a", "b", "c", "d"], "other": [1, 2], "scalar": 4}
    assert _per_layer_lists(have, types, ["linear_attention", "full_attention"]) == \
        {"mlp_layer_types": ["dense", "sparse"], "indexer_types": ["a", "c"]}
    assert _per_layer_lists(have, ["a", "b"], ["a", "b"]) == {}  # nothing cut: nothing changes
