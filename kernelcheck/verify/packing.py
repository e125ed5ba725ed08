"""`verify --packing`: run the real layers on sequences packed by the job's collator and alone, and measure the mix.

A tiny Qwen3.5 (Gated DeltaNet + short conv + full attention) is built from its config with random weights,
fp32 (the same on every device, so a difference is a mix, not rounding). For each packing mode the batch is
transformers' DataCollatorWithFlattening with that mode's flags (kernelcheck/packing/batches.py: the flags
doctor recommends), at three pairs of lengths (short, around fla's chunk size 64, long):
- `position_ids`: DataCollatorWithFlattening() (TRL's padding-free `bfd` passes the same);
- `cu_seq_lens`: return_flash_attn_kwargs=True (no seq_idx);
- `flash`: return_flash_attn_kwargs=True, return_seq_idx=True.
The forward is a training forward (use_cache=False; with a cache transformers does not find the packed
sequences and the attention layers mix: the `cached` number shows it). Every sequence's logits are
compared with the sequence run alone; per layer type, each mixer is fed the alone runs' inputs, so its
number is its own mix, not what earlier layers passed on. On CPU this measures the torch path; on a GPU,
whatever kernels transformers bound. doctor's decision for the same functions stands beside each mode.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelcheck.packing import batches
from kernelcheck.report.wrap import clip

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

log = logging.getLogger(__name__)

TOLERANCE = {"cpu": 1e-3, "cuda": 2e-2}  # fp32 (Triton kernels may use tf32); a mix is ~0.03-0.3
MODES = ("position_ids", "cu_seq_lens", "flash")
_MIXERS = (("linear_attn", "linear_attention"), ("self_attn", "full_attention"))


@dataclass
class LengthResult:
    name: str
    lengths: tuple[int, int]
    outcome: str  # correct | mixed | raises
    max_logit_diff: float | None = None
    per_layer_type: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "lengths": list(self.lengths), "outcome": self.outcome,
                "max_logit_diff": self.max_logit_diff, "per_layer_type": self.per_layer_type, "error": self.error}


@dataclass
class PackingResult:
    mode: str
    outcome: str  # the worst over the lengths: raises > mixed > correct
    lengths: list[LengthResult]
    collator: str
    doctor: str | None = None  # doctor's decision for this mode here (None: not asked)

    @property
    def max_logit_diff(self) -> float | None:
        got = [r.max_logit_diff for r in self.lengths if r.max_logit_diff is not None]
        return max(got) if got else None

    @property
    def error(self) -> str | None:
        return next((r.error for r in self.lengths if r.error), None)

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "outcome": self.outcome, "collator": self.collator,
                "max_logit_diff": self.max_logit_diff, "error": self.error,
                "per_layer_type": worst_per_type(self.lengths), "lengths": [r.as_dict() for r in self.lengths],
                "doctor": self.doctor, "agrees": None if self.doctor is None else self.doctor == self.outcome}


def worst_per_type(rows: list[LengthResult]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows:
        for k, v in r.per_layer_type.items():
            out[k] = max(out.get(k, 0.0), v)
    return out


def combine(rows: list[LengthResult]) -> str:
    """A mode's outcome over its lengths: raises if any raised, mixed if any mixed, else correct."""
    outcomes = {r.outcome for r in rows}
    return next((o for o in ("raises", "mixed") if o in outcomes), "correct")


def tiny_model(device: str, layer_types: tuple[str, ...] = ("linear_attention", "full_attention")) -> Any:
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(0)
    cfg: Any = Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                 num_hidden_layers=len(layer_types), num_attention_heads=2, num_key_value_heads=1,
                                 head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
                                 linear_key_head_dim=16, linear_value_head_dim=16, layer_types=list(layer_types))
    model_cls: Any = Qwen3_5ForCausalLM
    return model_cls(cfg).to(device=device, dtype=torch.float32).eval()


def _mixers(model: Any) -> list[tuple[str, Any]]:
    out = []
    for layer in model.model.layers:
        for attr, kind in _MIXERS:
            mod = getattr(layer, attr, None)
            if mod is not None:
                out.append((kind, mod))
    return out


def _first(out: Any) -> Any:
    return (out[0] if isinstance(out, tuple) else out).detach().float()


def _record(model: Any, seq: Any) -> tuple[Any, list[tuple[Any, Any]]]:
    """Logits of `seq` alone and (input, output) of every mixer."""
    import torch

    seen: list[tuple[Any, Any]] = []
    handles = []
    for _kind, mod in _mixers(model):
        def hook(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
            hs = args[0] if args else kwargs["hidden_states"]
            seen.append((hs.detach(), _first(out)))

        handles.append(mod.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            logits = model(seq, use_cache=False).logits.float()
    finally:
        for h in handles:
            h.remove()
    return logits, seen


def _isolated(model: Any, batch: dict[str, Any], inputs: list[Any]) -> list[Any]:
    """Each mixer's output on the packed row when fed the alone runs' inputs, concatenated."""
    import torch

    outs: list[Any] = []
    handles = []
    for i, (_kind, mod) in enumerate(_mixers(model)):
        def pre(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], i: int = i) -> Any:
            if args:
                return (inputs[i], *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": inputs[i]}

        def post(_m: Any, _a: Any, out: Any) -> None:
            outs.append(_first(out))

        handles += [mod.register_forward_pre_hook(pre, with_kwargs=True), mod.register_forward_hook(post)]
    try:
        with torch.no_grad():
            model(**batch, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return outs


def _diff(a: Any, b: Any) -> float:
    return float((a - b).abs().max())


def measure_lengths(model: Any, mode: str, name: str, lens: tuple[int, int], device: str,
                    facts: dict[str, Any], use_cache: bool = False) -> LengthResult:
    """Pack two sequences with the mode's collator; compare every sequence with it run alone."""
    import torch

    gen = torch.Generator().manual_seed(sum(lens))
    seqs = [torch.randint(0, 128, (n,), generator=gen) for n in lens]
    alone = [_record(model, s[None].to(device)) for s in seqs]
    batch = batches.packed_batch(mode, [s.tolist() for s in seqs], facts, device)
    try:
        with torch.no_grad():
            out = model(**batch, use_cache=use_cache).logits.float()
        mixer_out = _isolated(model, batch, [torch.cat([a[1][i][0] for a in alone], dim=1)
                                             for i in range(len(alone[0][1]))])
    except (ValueError, RuntimeError, TypeError) as exc:
        return LengthResult(name, lens, "raises", error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    offs = [0, lens[0], lens[0] + lens[1]]
    diff = max(_diff(out[:, offs[k]:offs[k + 1]], alone[k][0]) for k in range(2))
    per: dict[str, float] = {}
    for i, (kind, _mod) in enumerate(_mixers(model)):
        want = torch.cat([a[1][i][1] for a in alone], dim=1)
        per[kind] = round(max(per.get(kind, 0.0), _diff(mixer_out[i], want)), 6)
    outcome = "mixed" if diff > TOLERANCE.get(device.split(":")[0], 2e-2) else "correct"
    return LengthResult(name, lens, outcome, round(diff, 6), per)


def measure(mode: str, device: str = "cpu", lengths: dict[str, tuple[int, int]] | None = None,
            model: Any = None, *, facts: dict[str, Any]) -> PackingResult:
    """`facts`: packing.toml of the matrix (packing/decide.py `load_facts`)."""
    from kernelcheck.integrations.transformers_logs import quiet_fallback_lines
    from kernelcheck.report import progress

    k = f"mode {MODES.index(mode) + 1} of {len(MODES)} ({mode})" if mode in MODES else f"mode {mode}"
    with quiet_fallback_lines():
        model = model if model is not None else tiny_model(device)
        rows = []
        for n, lens in (lengths or batches.LENGTHS).items():
            progress.doing(f"{k}, {lens[0]}+{lens[1]} tokens")  # each forward and backward, packed and alone
            rows.append(measure_lengths(model, mode, n, lens, device, facts))
    return PackingResult(mode, combine(rows), rows, batches.collator_call(batches.collator_flags(mode, facts)))


def measure_all(device: str = "cpu", lengths: dict[str, tuple[int, int]] | None = None, *,
                m: Matrix) -> list[PackingResult]:
    from kernelcheck.integrations.transformers_logs import quiet_fallback_lines
    from kernelcheck.packing.decide import load_facts
    facts = load_facts(m=m)
    with quiet_fallback_lines():
        model = tiny_model(device)
        return [measure(mode, device, lengths, model, facts=facts) for mode in MODES]


def cached_forward(device: str = "cpu", *, m: Matrix) -> float:
    """The recommended batch (flash) in an attention-only tiny model, forward WITH the config's cache: the
    max |logit diff| the cache causes (the root cause of verify's old `flash mixed` on the H200)."""
    from kernelcheck.integrations.transformers_logs import quiet_fallback_lines
    from kernelcheck.packing.decide import load_facts

    with quiet_fallback_lines():
        model = tiny_model(device, ("full_attention", "full_attention"))
        r = measure_lengths(model, "flash", "chunk", batches.LENGTHS["chunk"], device, load_facts(m=m),
                             use_cache=True)
    return r.max_logit_diff if r.max_logit_diff is not None else float("nan")


def _length_line(r: Any) -> str:
    head = f"    {r.name:<5} {r.lengths[0]:>3} + {r.lengths[1]:<3}"
    if r.outcome == "raises":
        return f"{head} raises {clip(r.error or '', 72)}"
    layers = ", ".join(f"{k} {v:.2g}" for k, v in r.per_layer_type.items())
    return f"{head} {r.outcome:<7} logits {r.max_logit_diff:.2g} ({layers})"


def render_text(results: list[PackingResult], device: str, cached: float | None = None) -> str:
    # one logical line a sentence: the terminal wraps it once, to its width (report/terminal.py)
    lines = [f"kernelcheck verify --packing: tiny Qwen3.5 (GDN + conv + attention), fp32, {device}; two sequences "
             "packed by DataCollatorWithFlattening vs alone, training forward (use_cache=False); max |diff|"]
    for r in results:
        doc = "" if r.doctor is None else f"doctor: {r.doctor}" + ("" if r.doctor == r.outcome else " (DISAGREES)")
        lines.append(f"  {r.mode:<13} {r.outcome:<8} {doc}")
        lines.append(f"    batch: {r.collator}")
        lines.extend(_length_line(x) for x in r.lengths)
    if cached is not None:
        lines.append(f"  the flash batch with a cache (use_cache on, no gradient checkpointing), attention layers only:"
                     f"\n    logits {cached:.2g} (the attention finds the sequences only without a cache)")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    """`python -m kernelcheck.verify.packing [--json] [device]`: a process of its own, so it reads its own matrix
    (core/entry.py), as a command's Context does."""
    import json

    from kernelcheck.core import entry

    dev = next((a for a in argv if not a.startswith("-")), "cpu")
    res = measure_all(dev, m=entry.matrix())
    if "--json" in argv:
        print(json.dumps({"device": dev, "results": [r.as_dict() for r in res]}, indent=2))
    else:
        print(render_text(res, dev))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
