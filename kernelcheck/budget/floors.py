"""The physical floor of each op class of a training step: FLOPs and bytes counted from the model's config and the
tokens, against the GPU's dense bf16 peak and its memory bandwidth (matrix/gpus.toml).

The counts are lower bounds of an ideal step, not a model of any kernel: each GEMM once at the tensor cores' peak,
attention and the GDN core by their FLOPs, the memory-bound classes (short conv, norms, activations, loss,
optimizer) reading and writing each tensor once per pass, copies and idle time zero. Passes: forward, the
forward again under activation checkpointing, backward (two GEMMs per forward GEMM). Every count is returned with
its formula, so the JSON says how each floor was made.

Layers are read from the config: a layer type "linear_attention" (Gated DeltaNet: linear_num_key_heads,
linear_num_value_heads, linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim) or anything else as
softmax attention (num_attention_heads, num_key_value_heads, head_dim; a gated query doubles q_proj as Qwen3.5's
attention does, attn_output_gate).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

BF16 = 2  # bytes per element of activations and weights
GDN_CHUNK = 64  # fla's chunk size for the chunked delta rule
LINEAR = "linear_attention"


@dataclass(frozen=True)
class Shape:
    """What the floors read from a text config."""

    hidden: int
    ffn: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    gated_query: bool
    gdn_k_heads: int
    gdn_v_heads: int
    gdn_k_dim: int
    gdn_v_dim: int
    conv_kernel: int
    layer_types: tuple[str, ...]
    tied_embeddings: bool

    @property
    def conv_dim(self) -> int:
        return 2 * self.gdn_k_heads * self.gdn_k_dim + self.gdn_v_heads * self.gdn_v_dim

    def layer_params(self, kind: str) -> int:
        """Weights of one layer's matmuls (its MLP included)."""
        h = self.hidden
        mlp = 3 * h * self.ffn
        if kind == LINEAR:
            qkvz = h * (2 * self.gdn_k_heads * self.gdn_k_dim + 2 * self.gdn_v_heads * self.gdn_v_dim)
            ba = h * 2 * self.gdn_v_heads
            out = self.gdn_v_heads * self.gdn_v_dim * h
            return qkvz + ba + out + mlp
        q = h * self.heads * self.head_dim * (2 if self.gated_query else 1)
        kv = 2 * h * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * h
        return q + kv + o + mlp

    def matmul_params(self, layers: Counter[str]) -> int:
        """Weights the step multiplies by: the layers and the LM head (the embedding is a look-up)."""
        return sum(self.layer_params(k) * n for k, n in layers.items()) + self.vocab * self.hidden

    def parameters(self, layers: Counter[str]) -> int:
        """All weights: the matmuls, the embedding (unless tied to the LM head); norms and conv weights are small."""
        conv = sum(n * self.conv_dim * self.conv_kernel for k, n in layers.items() if k == LINEAR)
        emb = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.matmul_params(layers) + emb + conv


def _int(d: dict[str, Any], key: str, default: int) -> int:
    v = d.get(key)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def shape_of(fields: dict[str, Any]) -> Shape:
    """The shape of a text config (its fields as config.json holds them)."""
    h = _int(fields, "hidden_size", 0)
    heads = _int(fields, "num_attention_heads", 1)
    n = _int(fields, "num_hidden_layers", 1)
    types = fields.get("layer_types")
    if not (isinstance(types, list) and types and all(isinstance(t, str) for t in types)):
        if "linear_num_value_heads" in fields:
            every = _int(fields, "full_attention_interval", 4)
            types = [("full_attention" if (i + 1) % every == 0 else LINEAR) for i in range(n)]
        else:
            types = ["full_attention"] * n
    return Shape(
        hidden=h, ffn=_int(fields, "intermediate_size", 4 * h), vocab=_int(fields, "vocab_size", 0), heads=heads,
        kv_heads=_int(fields, "num_key_value_heads", heads), head_dim=_int(fields, "head_dim", h // heads or 1),
        gated_query=bool(fields.get("attn_output_gate", "linear_num_value_heads" in fields)),
        gdn_k_heads=_int(fields, "linear_num_key_heads", 0), gdn_v_heads=_int(fields, "linear_num_value_heads", 0),
        gdn_k_dim=_int(fields, "linear_key_head_dim", 0), gdn_v_dim=_int(fields, "linear_value_head_dim", 0),
        conv_kernel=_int(fields, "linear_conv_kernel_dim", 4), layer_types=tuple(types),
        tied_embeddings=bool(fields.get("tie_word_embeddings", False)))


@dataclass(frozen=True)
class Work:
    """One class's floor: FLOPs and bytes of the step, and how they were counted."""

    flops: float
    bytes: float
    formula: str


def work(shape: Shape, layers: Counter[str], tokens: int, checkpointing: bool, train: bool = True,
         parameters: int | None = None) -> dict[str, Work]:
    """The FLOPs and bytes of each class for one step of `layers` (type -> count) on `tokens` tokens."""
    t, h, b = float(tokens), shape.hidden, BF16
    fwd = 2.0 if (train and checkpointing) else 1.0  # forward passes over the layers (checkpointing: again)
    bwd = 1.0 if train else 0.0
    n_attn = sum(n for k, n in layers.items() if k != LINEAR)
    n_gdn = layers.get(LINEAR, 0)
    n_all = n_attn + n_gdn
    out: dict[str, Work] = {}
    # GEMM: 2 FLOPs per weight per token a pass, the backward twice that; the LM head is not recomputed
    layer_w = sum(shape.layer_params(k) * n for k, n in layers.items())
    head_w = shape.vocab * h
    gemm = 2 * t * (layer_w * (fwd + 2 * bwd) + head_w * (1 + 2 * bwd))
    out["gemm"] = Work(gemm, 0.0, "2*T*(W_layers*(passes + 2*backward) + W_head*(1 + 2*backward))")
    # causal attention: QK^T and PV, half the square; backward 2.5x the forward
    attn_fwd = 2.0 * t * t * shape.heads * shape.head_dim * n_attn
    out["attention"] = Work(attn_fwd * (fwd + 2.5 * bwd), 0.0, "2*T^2*heads*head_dim per layer (causal), "
                            "backward 2.5x")
    # GDN core, chunked delta rule: per token and value head C*(3*dk + 2*dv) + 3*dk*dv multiply-adds (WY
    # representation, state update, output); backward about twice the forward
    dk, dv, hv = shape.gdn_k_dim, shape.gdn_v_dim, shape.gdn_v_heads
    gdn_fwd = 2.0 * t * hv * (GDN_CHUNK * (3 * dk + 2 * dv) + 3 * dk * dv) * n_gdn
    gdn_io = t * (2 * shape.gdn_k_heads * dk + 2 * hv * dv + 2 * hv) * b * n_gdn
    out["gdn"] = Work(gdn_fwd * (fwd + 2 * bwd), gdn_io * (fwd + 2 * bwd),
                      f"2*T*v_heads*(C*(3*dk+2*dv)+3*dk*dv), C={GDN_CHUNK}, backward 2x")
    # memory-bound classes: a forward reads its input and writes its output; a backward reads input and output
    # gradient and writes the input gradient (3 tensors)
    rw_fwd, rw_bwd = 2.0 * fwd, 3.0 * bwd
    conv = t * shape.conv_dim * b * n_gdn
    out["short_conv"] = Work(0.0, conv * (rw_fwd + rw_bwd), "T*conv_dim*2 B per tensor, 2 a forward, 3 a backward")
    norm_width = n_all * 2 * h + h  # input and post-attention norm per layer, the final norm
    norm_width += n_attn * (shape.heads + shape.kv_heads) * shape.head_dim  # q/k norms
    norm_width += n_gdn * hv * dv * 3 // 2  # the gated output norm reads its gate too
    out["norms"] = Work(0.0, t * norm_width * b * (rw_fwd + rw_bwd), "every norm's width x T x 2 B, read+write")
    act = t * shape.ffn * b * n_all * (3 * fwd + 5 * bwd)  # SwiGLU: 2 in 1 out; backward 3 in 2 out
    resid = t * h * b * n_all * 2 * 3 * fwd  # two residual adds per layer
    out["elementwise"] = Work(0.0, act + resid, "SwiGLU 3 tensors forward, 5 backward; 2 residual adds/layer")
    loss = t * shape.vocab * b * (1 + bwd)  # read the logits once, write their gradient once (fused)
    out["loss"] = Work(0.0, loss, "T*vocab*2 B: logits read once, their gradient written once")
    p = parameters if parameters is not None else shape.parameters(layers)
    out["optimizer"] = Work(0.0, 7.0 * b * p * bwd, "AdamW: read param, grad, m, v; write param, m, v (2 B each)")
    return out


def model_flops(shape: Shape, layers: Counter[str], tokens: int) -> float:
    """6*N*T for the matmul weights N of these layers and the LM head (the MFU convention)."""
    return 6.0 * shape.matmul_params(layers) * tokens


def full_layers(shape: Shape) -> Counter[str]:
    return Counter(LINEAR if t == LINEAR else "full_attention" for t in shape.layer_types)
