"""A CPU stand-in for fla.ops.gated_delta_rule.chunk_gated_delta_rule: transformers' own torch chunk rule run on
each segment of cu_seqlens, with fla's keyword arguments."""

from __future__ import annotations

import os

import torch


def _torch_rule():
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    fn = m.torch_chunk_gated_delta_rule
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, cu_seqlens=None):
    rule = _torch_rule()
    kw = {"initial_state": initial_state, "output_final_state": output_final_state,
          "use_qk_l2norm_in_kernel": use_qk_l2norm_in_kernel}
    if cu_seqlens is None:
        return rule(q, k, v, g=g, beta=beta, **kw)
    cu = cu_seqlens.tolist()
    outs = [rule(q[:, a:b], k[:, a:b], v[:, a:b], g=g[:, a:b], beta=beta[:, a:b], **kw)[0]
            for a, b in zip(cu, cu[1:], strict=False) if b > a]
    return torch.cat(outs, dim=1), None


if os.environ.get("FAKE_KERNELS_DROP") == "cu_seqlens":  # a rule without the parameter: transformers drops it
    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,  # type: ignore[no-redef]
                               output_final_state=False, use_qk_l2norm_in_kernel=False):
        return _torch_rule()(q, k, v, g=g, beta=beta, initial_state=initial_state,
                             output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
