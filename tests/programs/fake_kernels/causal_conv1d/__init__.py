"""A CPU stand-in for causal-conv1d's causal_conv1d_fn (see ../README.md): a depthwise causal conv per segment
of seq_idx, with the real function's keyword arguments."""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

__version__ = "0.0.0+fake"


def _conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    k = weight.shape[-1]
    return F.conv1d(x, weight.unsqueeze(1), bias, padding=k - 1, groups=x.shape[1])[..., : x.shape[-1]]


def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                     final_states_out=None, activation=None):
    if seq_idx is None:
        out = _conv(x, weight, bias)
    else:
        ids = seq_idx[0]
        cuts = [0, *(torch.nonzero(ids[1:] != ids[:-1]).flatten() + 1).tolist(), ids.numel()]
        parts = [_conv(x[..., a:b], weight, bias) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
        out = torch.cat(parts, dim=-1)
    return F.silu(out) if activation in ("silu", "swish") else out


if os.environ.get("FAKE_KERNELS_DROP") == "seq_idx":  # a conv without the parameter: transformers' filter drops it
    def causal_conv1d_fn(x, weight, bias=None, activation=None):  # type: ignore[no-redef]
        out = _conv(x, weight, bias)
        return F.silu(out) if activation in ("silu", "swish") else out
