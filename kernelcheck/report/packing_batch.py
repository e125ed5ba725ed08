"""`verify --packing --batch`: the typed section (values, no sentences) and its text.

- `BatchInfo`: where the batch came from, its keys (dtype, shape), the segments and where they were read from;
- `FunctionReach`: per kernel function (causal_conv1d_fn/update, chunk_gated_delta_rule, the attention), which
  packing keys the model passed it and which reached the implementation that ran;
- `SegmentDiff`: per segment, packed vs the segment alone through the same layers, forward and backward;
- `Payoff`: `--benchmark`: a training step on the same tokens padded to the longest vs packed.
JSON: kernelcheck.verify-packing/1's `batch`, `reach`, `segments`, `payoff` (scripts/gen_schemas.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernelcheck.core.status import Finding
from kernelcheck.report.wrap import clip


@dataclass(frozen=True)
class BatchInfo:
    source: str
    tokens: int
    keys: dict[str, tuple[str, tuple[int, ...]]]  # key -> (dtype, shape)
    segments: tuple[tuple[int, int], ...]
    segments_from: str  # cu_seq_lens_q | seq_idx | position_ids | input_ids (one sequence)
    remapped_ids: bool = False  # token ids >= the tiny model's vocabulary were taken modulo it

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "tokens": self.tokens,
                "keys": {k: {"dtype": d, "shape": list(s)} for k, (d, s) in self.keys.items()},
                "segments": [list(s) for s in self.segments], "segments_from": self.segments_from,
                "remapped_ids": self.remapped_ids}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BatchInfo:
        return cls(d["source"], d["tokens"], {k: (v["dtype"], tuple(v["shape"])) for k, v in d["keys"].items()},
                   tuple((a, b) for a, b in d["segments"]), d["segments_from"], d.get("remapped_ids", False))


@dataclass(frozen=True)
class FunctionReach:
    function: str  # causal_conv1d_fn, chunk_gated_delta_rule, ..., attention
    implementation: str  # dotted name of what ran (the last call's)
    fast: bool  # the package's kernel (not transformers' torch path)
    calls: int
    received: tuple[str, ...]  # packing keys the model passed (non-None)
    passed: tuple[str, ...]  # packing keys the implementation was called with (after transformers' filter)
    error: str | None = None
    traced: bool = True  # False: transformers' wrapper had no implementation to wrap, `passed` is not known

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "received": list(self.received), "passed": list(self.passed)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FunctionReach:
        return cls(**{**d, "received": tuple(d["received"]), "passed": tuple(d["passed"])})


@dataclass(frozen=True)
class SegmentDiff:
    index: int
    start: int
    end: int
    output_max_abs: float
    output_rel_l2: float
    grad_max_abs: float
    grad_rel_l2: float
    wrong: bool  # beyond the threshold the controls placed (Controls.threshold)
    first_layer: str | None = None  # the first decoder layer whose output differs beyond it (None: the
    # forward matches and only the gradients differ)
    token_distance: float = 0.0  # the worst token's |diff| over the segment's RMS token norm (logits, grads)
    worst_token: int = 0  # that token's index in the segment (0: the segment's first token)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SegmentDiff:
        return cls(**d)


@dataclass(frozen=True)
class Control:
    """One control run of the packed-vs-alone comparison (verify/packing_controls.py)."""

    kind: str  # clean | rerun (what must be equal) | boundaries-removed (the fault)
    distance: float  # the largest segment distance (SegmentDiff.token_distance's measure)
    per_segment: tuple[float, ...] = ()
    error: str | None = None  # the control's forward raised

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "per_segment": list(self.per_segment)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Control:
        return cls(d["kind"], d["distance"], tuple(d["per_segment"]), d.get("error"))


@dataclass(frozen=True)
class Controls:
    negative: Control
    positive: Control
    threshold: float | None  # between the two (None: not decided)
    separation: float | None  # positive / negative (the negative floored)
    decided: bool  # the positive control was told apart by the margin
    margin: float

    def to_json(self) -> dict[str, Any]:
        return {"negative": self.negative.to_json(), "positive": self.positive.to_json(),
                "threshold": self.threshold, "separation": self.separation, "decided": self.decided,
                "margin": self.margin}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Controls:
        return cls(Control.from_json(d["negative"]), Control.from_json(d["positive"]), d["threshold"],
                   d["separation"], d["decided"], d["margin"])


@dataclass(frozen=True)
class Payoff:
    """A training step on the same tokens: padded to the longest vs packed (tokens/s of real tokens)."""

    shape: str  # full (the real layer widths) | tiny
    device: str
    lengths: int  # examples
    real_tokens: int
    padded_tokens: int
    padded_s: float
    packed_s: float
    padding_fraction: float  # the `padding` command's numbers for the same lengths (one padded batch)
    packing_speedup_bound: float
    packed_with: str = "cu_seq_lens + seq_idx"  # what the packed row carried

    @property
    def ratio(self) -> float:
        return round(self.padded_s / self.packed_s, 3) if self.packed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio,
                "padded_tokens_per_s": round(self.real_tokens / self.padded_s, 1) if self.padded_s else None,
                "packed_tokens_per_s": round(self.real_tokens / self.packed_s, 1) if self.packed_s else None}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Payoff:
        keep = {k: v for k, v in d.items() if k not in ("ratio", "padded_tokens_per_s", "packed_tokens_per_s")}
        return cls(**keep)


@dataclass
class BatchSection:
    batch: BatchInfo
    device: str
    dtype: str
    tolerance: float
    reach: list[FunctionReach] = field(default_factory=list)
    segments: list[SegmentDiff] = field(default_factory=list)
    error: str | None = None  # the packed run raised (the comparison did not run)
    payoff: Payoff | None = None
    ran: bool = True  # False: the lint found offsets no kernel can take, so no forward ran
    controls: Controls | None = None  # None: not compared (a raise, one segment, or not run)

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch.to_json(), "device": self.device, "dtype": self.dtype,
                "tolerance": self.tolerance, "reach": [r.to_json() for r in self.reach],
                "segments": [s.to_json() for s in self.segments], "error": self.error,
                "payoff": self.payoff.to_json() if self.payoff is not None else None, "ran": self.ran,
                "controls": self.controls.to_json() if self.controls is not None else None}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BatchSection:
        return cls(BatchInfo.from_json(d["batch"]), d["device"], d["dtype"], d["tolerance"],
                   [FunctionReach.from_json(r) for r in d["reach"]], [SegmentDiff.from_json(s) for s in d["segments"]],
                   d.get("error"), Payoff.from_json(d["payoff"]) if d.get("payoff") else None, d.get("ran", True),
                   Controls.from_json(d["controls"]) if d.get("controls") else None)


def finding_json(f: Finding) -> dict[str, Any]:
    """A finding as every report prints it (no `decorators`: none of these is about decorators)."""
    return {"id": f.id, "severity": str(getattr(f.severity, "value", f.severity)), "message": f.message,
            "fix": f.fix, "reference": f.reference, "functions": list(f.functions)}


def _g(x: float) -> str:
    return f"{x:.2g}"


def reach_lines(reach: list[FunctionReach]) -> list[str]:
    out = ["  which packing keys reached each kernel (one forward of the real layers):"]
    for r in reach:
        got = (", ".join(r.passed) or "none") if r.traced else "not recorded"
        gave = ", ".join(r.received) or "none"
        path = ("kernel" if r.fast else "torch path") if r.function != "attention" else (
            r.implementation.rsplit(".", 1)[-1].removesuffix("_attention_forward").removesuffix("_forward"))
        tail = f"; raised {r.error.split(':')[0]}" if r.error else ""
        out.append(f"    {r.function:<24} {path:<10} given {gave}; reached it: {got} ({r.calls} call"
                   f"{'s' if r.calls != 1 else ''}){tail}")
    return out


def segment_lines(sec: BatchSection) -> list[str]:
    if sec.error:
        return [f"  packed vs separate: not compared, the packed forward raised: {clip(sec.error, 90)}"]
    c = sec.controls
    limit = (f"threshold {c.threshold:.2g}" if c is not None and c.threshold is not None
             else "no threshold: the controls did not separate" if c is not None else "one segment: no controls")
    out = [f"  packed vs each segment alone, forward and backward: max |diff| (relative L2), worst token ({limit})"]
    for s in sec.segments:
        word = ("-" if c is not None and not c.decided else "ok" if not s.wrong else f"WRONG from {s.first_layer}"
                if s.first_layer else "WRONG in the backward only")
        out.append(f"    segment {s.index} [{s.start}:{s.end}] outputs {_g(s.output_max_abs)} ({_g(s.output_rel_l2)})"
                   f"  grads {_g(s.grad_max_abs)} ({_g(s.grad_rel_l2)})  token {s.start + s.worst_token} "
                   f"{_g(s.token_distance)}  {word}")
    if c is not None:
        out.append(f"  controls, same weights and tokens: must be equal ({c.negative.kind}) {_g(c.negative.distance)}"
                   f"; boundaries removed {_g(c.positive.distance)}; "
                   + (f"{'over 1000' if c.separation > 1000 else f'{c.separation:.3g}'}x apart"
                      if c.separation is not None else "not measured")
                   + ("" if c.decided else f" (under {c.margin:g}x: cannot decide)"))
    return out


def payoff_lines(p: Payoff) -> list[str]:
    j = p.to_json()
    return [f"  payoff ({p.shape} shape, {p.device}, one training step on {p.lengths} examples, {p.real_tokens:,} "
            f"real tokens):",
            f"    padded to the longest  {p.padded_tokens:,} tokens computed  {p.padded_s * 1e3:.1f} ms  "
            f"{j['padded_tokens_per_s']:,} real tokens/s",
            f"    packed                 {p.real_tokens:,} tokens computed  {p.packed_s * 1e3:.1f} ms  "
            f"{j['packed_tokens_per_s']:,} real tokens/s ({p.packed_with})",
            f"    packing is {p.ratio:.2f}x the padded step; padding was {p.padding_fraction:.1%} of computed tokens "
            f"(bound {p.packing_speedup_bound:.2f}x if time scaled with tokens)"]


def render(sec: BatchSection, model: str) -> list[str]:
    b = sec.batch
    keys = ", ".join(f"{k} {d}{list(s)}" for k, (d, s) in b.keys.items())
    out = [f"kernelcheck verify --packing --batch: {model}, tiny shape from its config, {sec.dtype}, {sec.device}",
           f"  batch: {b.source}: {b.tokens} tokens, {len(b.segments)} segment{'s' if len(b.segments) != 1 else ''} "
           f"(from {b.segments_from}{'; token ids taken modulo the tiny vocabulary' if b.remapped_ids else ''})",
           f"  keys: {keys}"]
    if not sec.ran:
        out.append("  not run: the offsets break the contract every varlen kernel reads (the finding below)")
    if sec.reach:
        out += reach_lines(sec.reach)
    if sec.segments or sec.error:
        out += segment_lines(sec)
    if sec.payoff is not None:
        out += payoff_lines(sec.payoff)
    return out
