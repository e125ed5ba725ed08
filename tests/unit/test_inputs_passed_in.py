"""What core needs from an integration is passed in, never imported (tests/unit/test_architecture.py LAYERS): the
installed transformers' model types into `models.resolve`, fla's dispatch into `rules.Facts`."""

from __future__ import annotations

import pytest

from kernelcheck.core import matrix, models, rules
from kernelcheck.core.errors import BadInput
from kernelcheck.integrations import fla_dispatch
from tests.environments import make_env


def test_resolve_asks_the_lookup_it_is_given_for_a_type_the_matrix_lacks() -> None:
    spec = matrix.ModelType(name="brand_new", family="unknown", module="brand_new", functions=())
    asked: list[str] = []
    got = models.resolve("brand_new", installed=lambda t: (asked.append(t), spec)[1] if t == "brand_new" else None)
    assert (got.model_type, got.source, got.spec) == ("brand_new", "model_type", spec) and asked == ["brand_new"]
    with pytest.raises(BadInput, match="Unknown model 'brand_new'"):
        models.resolve("brand_new")  # the default knows the matrix only


def test_a_fla_backend_rule_is_undecided_without_the_dispatch_and_decided_with_it() -> None:
    env = make_env("9.0", triton="3.6.0", fla="0.6.0", gpu_source="none")
    base = rules.Facts(env=env, mode="train", bound=frozenset({"fla"}), model="qwen3.8-27b")
    without = {h.rule.id: h.certain for h in rules.evaluate(base)}
    with_it = {h.rule.id: h.certain for h in rules.evaluate(rules.Facts(
        env=env, mode="train", bound=frozenset({"fla"}), model="qwen3.8-27b", fla_dispatch=fla_dispatch.backends))}
    assert with_it == {"fla-640-refuses": True}
    assert without.get("fla-640-refuses") is False  # may apply: nobody asked fla's dispatch
