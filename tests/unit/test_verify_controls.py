"""verify's fast-vs-reference comparison with its controls (verify/compare.py), on real tensors and the real torch
reference of the Gated DeltaNet rule: the negative control (the reference again) is 0, the positive control (the
gate dropped) is far beyond the tolerance, and a comparison whose positive control is not told apart is a
fallback (`verify-control-cannot-decide`), never a pass. The bound-path run with its controls in the JSON is
tests/integration/test_verify_controls.py."""

from __future__ import annotations

import math

import torch

from kernelcheck.verify import compare
from kernelcheck.verify.live_evidence import DirectComparison


def test_the_gate_dropped_is_told_apart_from_the_reference_beyond_the_bf16_tolerance():
    from transformers.models.qwen3_5.modeling_qwen3_5 import torch_chunk_gated_delta_rule as ref_fn

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 96, 4, 16) for _ in range(3))
    kw = {"g": -torch.rand(1, 96, 4) * 0.5, "beta": torch.rand(1, 96, 4), "use_qk_l2norm_in_kernel": True}
    ref = ref_fn(q, k, v, **kw)
    args, kwargs, what = compare._perturbed((q, k, v), kw)
    assert what == "g dropped" and bool((kwargs["g"] == 0).all()) and args[0] is q
    pos = compare._compare_outputs(ref_fn(*args, **kwargs), ref)[0]
    neg = compare._compare_outputs(ref_fn(q, k, v, **kw), ref)[0]
    assert neg == 0.0 and compare.decides(5e-2, neg, pos)  # bfloat16's tolerance, the strictest the GPU uses


def test_a_positive_control_within_the_tolerance_cannot_decide():
    assert not compare.decides(5e-2, 0.0, 0.07)  # not 2x the tolerance
    assert not compare.decides(1e-4, 0.3, 0.4)  # the reference's own rerun noise is as large
    assert not compare.decides(1e-4, 0.0, math.nan)  # no control ran
    x = torch.randn(4, 8)
    args, _, what = compare._perturbed((x,), {"activation": "silu"})
    assert what == "argument 0 x1.5" and torch.equal(args[0], x * 1.5)


def test_an_undecided_match_is_a_fallback_finding_and_never_a_mismatch():
    from types import SimpleNamespace

    from kernelcheck.core.status import Severity
    from kernelcheck.verify.statuses import model_findings

    undecided = DirectComparison(True, rel_err=0.01, max_abs_err=0.1, tolerance=5e-2, ok=None, negative_rel_err=0.0,
                                 positive_rel_err=0.07, perturbed="g dropped", decided=False)
    assert undecided.to_json()["controls"] == {"negative_rel_err": 0.0, "positive_rel_err": 0.07,
                                               "perturbed": "g dropped", "decided": False}
    run = SimpleNamespace(direct={"chunk_gated_delta_rule": undecided}, step_error=None, model_compare={},
                          failures={}, isolated={}, benchmark=None)
    found = [f for f in model_findings(run, None) if f.id == "verify-control-cannot-decide"]  # type: ignore[arg-type]
    assert [(f.severity, f.functions) for f in found] == [(Severity.FALLBACK, ("chunk_gated_delta_rule",))]
