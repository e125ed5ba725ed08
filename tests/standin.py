"""A stand-in `causal-conv1d` distribution for CPU tests of verify's fast-path evidence.

The real causal-conv1d is a CUDA extension and cannot run on the CI machine (no GPU). To test what
verify does when transformers binds a package kernel, this writes a real installed distribution
(dist-info + modules) whose `causal_conv1d_fn` / `causal_conv1d_update` compute the causal conv in
torch through their own autograd Function, with one behaviour baked in:
  ok              - correct results (verify must say fast, with this implementation as evidence)
  wrong           - output scaled by 1.5 (verify must say broken: mismatch against the reference)
  backward-raises - correct forward, RuntimeError in backward like fla#640 (broken in train, forward fast)
  wrong-grads     - correct forward, gradients doubled, silently (like fla#640 before fla 0.5): broken in train
  nan             - NaN output (broken)
  compiler-disabled - correct, but wrapped in torch.compiler.disable as fla 0.6.0 wraps every dispatched op: each call
                    is a graph break under torch.compile (verify --compile)
This is the one stand-in in these tests, for hardware that is not here; transformers, torch, the model
and kernelcheck are all real.
"""

from __future__ import annotations

from pathlib import Path

_CODE = '''
import torch
import torch.nn.functional as F

BEHAVIOUR = {behaviour!r}
__version__ = "1.7.0"


def _conv(x, weight, bias, activation):
    dim, width = weight.shape
    out = F.conv1d(x.to(weight.dtype), weight.unsqueeze(1), bias, padding=width - 1, groups=dim)[..., : x.shape[-1]]
    if activation in ("silu", "swish"):
        out = F.silu(out)
    return out.to(x.dtype)


class _CausalConv1dFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, activation):
        ctx.save_for_backward(x, weight, bias if bias is not None else torch.empty(0))
        ctx.activation, ctx.has_bias = activation, bias is not None
        out = _conv(x, weight, bias, activation)
        if BEHAVIOUR == "wrong":
            out = out * 1.5
        if BEHAVIOUR == "nan":
            out = out * float("nan")
        return out

    @staticmethod
    def backward(ctx, grad):
        if BEHAVIOUR == "backward-raises":
            raise RuntimeError("standin causal_conv1d: backward refused on this configuration (like fla#640)")
        if BEHAVIOUR == "wrong-grads":
            grad = grad * 2.0
        x, weight, bias = ctx.saved_tensors
        with torch.enable_grad():
            x_, w_ = x.detach().requires_grad_(), weight.detach().requires_grad_()
            b_ = bias.detach().requires_grad_() if ctx.has_bias else None
            out = _conv(x_, w_, b_, ctx.activation)
            ins = [x_, w_] + ([b_] if ctx.has_bias else [])
            gs = torch.autograd.grad(out, ins, grad)
        return gs[0], gs[1], gs[2] if ctx.has_bias else None, None


def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                     final_states_out=None, activation=None):
    return _CausalConv1dFn.apply(x, weight, bias, activation)


def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                         conv_state_indices=None):
    squeeze = x.dim() == 2
    if squeeze:
        x = x.unsqueeze(-1)
    seq = x.shape[-1]
    full = torch.cat([conv_state, x], dim=-1).to(weight.dtype)
    conv_state.copy_(full[:, :, -conv_state.shape[-1]:])
    out = F.conv1d(full, weight.unsqueeze(1), bias, padding=0, groups=weight.shape[0])[..., -seq:]
    if activation in ("silu", "swish"):
        out = F.silu(out)
    out = out.to(x.dtype)
    if BEHAVIOUR == "wrong":
        out = out * 1.5
    return out.squeeze(-1) if squeeze else out


if BEHAVIOUR == "compiler-disabled":  # as fla 0.6.0 wraps every dispatched op: a graph break under torch.compile
    causal_conv1d_fn = torch.compiler.disable(causal_conv1d_fn)
'''


def causal_conv1d_site(root: Path, behaviour: str = "ok") -> Path:
    """A site folder holding the stand-in `causal-conv1d` 1.7.0 distribution with `behaviour`."""
    site = root / f"standin-causal-conv1d-{behaviour}"
    pkg = site / "causal_conv1d"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(_CODE.format(behaviour=behaviour))
    (site / "causal_conv1d_cuda.py").write_text('"""stand-in for the CUDA extension module"""\n')
    info = site / "causal_conv1d-1.7.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: causal-conv1d\nVersion: 1.7.0\n")
    (info / "RECORD").write_text("")
    (info / "top_level.txt").write_text("causal_conv1d\ncausal_conv1d_cuda\n")
    return site
