"""`verify --packing`: run the real layers on two sequences packed and alone, and measure the mix.

A tiny Qwen3.5 (Gated DeltaNet + short conv + full attention) is built from its config with random weights.
Two sequences run alone, then packed into one row, for each way a job can pack:
- `position_ids`: only position_ids restart (what TRL's padding-free `bfd` collator passes);
- `cu_seq_lens`: position_ids plus the flash kwargs, no seq_idx (return_flash_attn_kwargs=True alone);
- `flash`: position_ids plus cu_seq_lens_q/k, max_length_q/k and seq_idx (DataCollatorWithFlattening with
  return_flash_attn_kwargs=True, return_seq_idx=True).
The second sequence's outputs are compared per layer type and at the logits. On CPU this measures the torch
path; on a GPU, whatever kernels transformers bound.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

TOLERANCE = {"cpu": 1e-3, "cuda": 2e-2}  # fp32 (Triton kernels may use tf32); a mix is ~0.1-0.3
MODES = ("position_ids", "cu_seq_lens", "flash")


@dataclass
class PackingResult:
    mode: str
    outcome: str  # correct | mixed | raises
    max_logit_diff: float | None = None
    per_layer_type: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "outcome": self.outcome, "max_logit_diff": self.max_logit_diff,
                "per_layer_type": self.per_layer_type, "error": self.error}


def _tiny_model(device: str) -> Any:
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(0)
    cfg: Any = Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=2,
                            linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                            layer_types=["linear_attention", "full_attention"])
    dtype = torch.float32  # the same dtype on every device, so the difference is the mix, not rounding
    model_cls: Any = Qwen3_5ForCausalLM
    return cfg, model_cls(cfg).to(device=device, dtype=dtype).eval()


def _hook_layers(model: Any, store: dict[str, list[Any]]) -> list[Any]:
    handles = []
    for layer in model.model.layers:
        for name, kind in (("linear_attn", "linear_attention"), ("self_attn", "full_attention")):
            mod = getattr(layer, name, None)
            if mod is None:
                continue

            def hook(_m: Any, _i: Any, out: Any, kind: str = kind) -> None:
                store.setdefault(kind, []).append((out[0] if isinstance(out, tuple) else out).detach().float())

            handles.append(mod.register_forward_hook(hook))
    return handles


def _packed_kwargs(mode: str, lens: tuple[int, int], device: str) -> dict[str, Any]:
    import torch

    pos = torch.cat([torch.arange(n) for n in lens]).unsqueeze(0).to(device)
    kw: dict[str, Any] = {"position_ids": pos}
    if mode in ("cu_seq_lens", "flash"):
        cu = torch.tensor([0, lens[0], lens[0] + lens[1]], dtype=torch.int32, device=device)
        kw.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(lens), max_length_k=max(lens))
    if mode == "flash":
        kw["seq_idx"] = (torch.cat([torch.full((n,), i, dtype=torch.int32) for i, n in enumerate(lens)])
                         .unsqueeze(0).to(device))
    return kw


def measure(mode: str, device: str = "cpu", lens: tuple[int, int] = (12, 10)) -> PackingResult:
    """Pack two sequences one way; compare the second one's outputs with it run alone."""
    import torch

    _cfg, model = _tiny_model(device)
    gen = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, 128, (1, n), generator=gen).to(device) for n in lens]
    alone: dict[str, list[Any]] = {}
    packed: dict[str, list[Any]] = {}
    with torch.no_grad():
        handles = _hook_layers(model, alone)
        model(seqs[0])
        alone.clear()
        ref = model(seqs[1]).logits.float()
        for h in handles:
            h.remove()
        handles = _hook_layers(model, packed)
        try:
            out = model(torch.cat(seqs, dim=1), **_packed_kwargs(mode, lens, device)).logits.float()
        except (ValueError, RuntimeError, TypeError) as exc:
            return PackingResult(mode, "raises", error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        finally:
            for h in handles:
                h.remove()
    per = {kind: max(float((p[:, lens[0]:] - a).abs().max()) for p, a in zip(packed[kind], alone[kind],
                                                                                 strict=True))
           for kind in alone}
    diff = float((out[:, lens[0]:] - ref).abs().max())
    return PackingResult(mode, "mixed" if diff > TOLERANCE.get(device, 2e-2) else "correct", round(diff, 6),
                         {k: round(v, 6) for k, v in per.items()})


def measure_all(device: str = "cpu") -> list[PackingResult]:
    return [measure(m, device) for m in MODES]


def render_text(results: list[PackingResult], device: str) -> str:
    lines = [f"kernelcheck verify --packing: tiny Qwen3.5, two sequences packed vs alone ({device})"]
    for r in results:
        if r.outcome == "raises":
            lines.append(f"  {r.mode:<13} raises   {r.error}")
            continue
        layers = ", ".join(f"{k} {v:.3g}" for k, v in r.per_layer_type.items())
        lines.append(f"  {r.mode:<13} {r.outcome:<8} max |logit diff| {r.max_logit_diff:.3g} ({layers})")
    return "\n".join(lines)


def command(query: str, as_json: bool) -> tuple[str, int]:
    """`verify --model M --packing`: (output, exit code). Exit 4 when no packing mode keeps sequences apart."""
    import json

    import torch

    from kernelcheck import schemas
    from kernelcheck.core import models as models_mod
    from kernelcheck.core.errors import BadInput

    model = models_mod.resolve(query)
    if "chunk_gated_delta_rule" not in model.spec.functions:
        raise BadInput(f"verify --packing measures the Gated DeltaNet + short conv path (Qwen3.5/3.6/3.8, "
                       f"Qwen3-Next); {query} ({model.model_type}) does not use it. Use `kernelcheck doctor "
                       f"--model {query} --packing MODE` for the decision from source.")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = measure_all(device)
    ok = any(r.outcome == "correct" for r in results)
    code = 0 if ok else 4
    if as_json:
        return json.dumps({"schema": schemas.schema_id("verify-packing"), "command": "verify",
                           "verdict": "ready" if ok else "broken", "exit_code": code, "model": model.to_json(),
                           "device": device,
                           "packing": [r.as_dict() for r in results]}, indent=2), code
    tail = ("verdict: READY: at least one packing mode keeps sequences apart here" if ok else
            "verdict: BROKEN: no packing mode keeps sequences apart here (exit 4); pad instead, or install "
            "fla-core and causal-conv1d and pass cu_seq_lens + seq_idx")
    return render_text(results, device) + "\n" + tail, code


if __name__ == "__main__":  # python -m kernelcheck.verify.packing [--json] [device]
    import json
    import sys

    dev = next((a for a in sys.argv[1:] if not a.startswith("-")), "cpu")
    res = measure_all(dev)
    if "--json" in sys.argv:
        print(json.dumps({"device": dev, "results": [r.as_dict() for r in res]}, indent=2))
    else:
        print(render_text(res, dev))
