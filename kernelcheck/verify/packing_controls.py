"""The packed-vs-alone comparison's own controls, and what the reach record alone decides.

A distance between a packed segment and the segment run alone means nothing until the same process, on the
same weights and the same tokens, has shown what "equal" and "mixed" measure at this shape and dtype:
- negative control (what must be equal): the same segments packed with boundaries built from them
  (cu_seq_lens_q/k, max_length_q/k, seq_idx and position_ids, the keys the forward takes): `clean`; where the
  forward refuses them (transformers' torch path) or a recurrent kernel did not get its key from them (then the
  clean packing mixes too, and is no control of equality), each segment run alone a second time: `rerun`;
- positive control (the fault the check exists to catch): the same tokens with every boundary removed
  (position_ids 0..T-1, nothing else): `boundaries-removed`.
The distance of one segment is the worst token's |packed - alone| over the segment's RMS token norm, of the
logits and of the gradient at the input embeddings (the larger): a whole-segment norm dilutes a leak into the
first kernel_size - 1 tokens that a per-token one shows. The verdict threshold sits between the two controls
(their geometric mean); when the positive control is not `MARGIN` times the negative one, this measurement
cannot tell mixed from equal here: `packing-control-cannot-decide` (exit 3), never "the segments match".

What is certain needs no threshold (`certain_findings`): a recurrent kernel (Gated DeltaNet, KDA, Mamba, the
conv: matrix/packing.toml [functions]) that ran on a row of several segments and got no boundary, or offsets /
seq_idx that miss a sequence start the row holds, carries its state across sequences: broken from the reach.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kernelcheck.core.status import Finding, Severity
from kernelcheck.packing import lint
from kernelcheck.report.packing_batch import Control, Controls

if TYPE_CHECKING:
    from kernelcheck.report.packing_batch import BatchSection, FunctionReach

MARGIN = 4.0  # the positive control must exceed the negative one this many times to decide
MAX_SAID = 1000.0  # a separation beyond this is said as "over 1000x" (a negative control of 0 makes it huge)
FLOOR = 1e-6  # a negative control of 0 (fp32, deterministic) counts as this, so a threshold exists
CLEAN, RERUN, REMOVED = "clean", "rerun", "boundaries-removed"
REF = "measured: verify --packing --batch (controls: the same segments packed clean, and with no boundaries)"
REF_REACH = "measured: verify --packing --batch (which packing keys reached each kernel, one forward)"
# what the implementation is called with, per key matrix/packing.toml says a function needs
ALIASES = {"cu_seq_lens_q": ("cu_seqlens", "cu_seq_lens_q"), "seq_idx": ("seq_idx",)}


def token_distance(packed: Any, alone: Any) -> tuple[float, int]:
    """(worst token's ||packed_t - alone_t|| / RMS_t ||alone_t||, its index in the segment) over [1, n, d]."""
    if not alone.numel():
        return 0.0, 0
    p, q = packed.float().reshape(-1, packed.shape[-1]), alone.float().reshape(-1, alone.shape[-1])
    per = (p - q).norm(dim=-1)
    rms = float(q.norm(dim=-1).pow(2).mean().sqrt())
    i = int(per.argmax())
    return (float(per[i]) / rms if rms > 0 else float(per[i])), i


def boundaries(view: lint.BatchView) -> tuple[tuple[int, int], ...]:
    """The row's sequences from every source at once: the valid offsets', seq_idx's and position_ids' starts.
    One source that misses a start another shows still leaves the start here, so the comparison sees it."""
    tokens = view.tokens
    cuts: set[int] = set()
    key = lint.reference_offsets(view)
    cu = view.values(key) if key else None
    if cu is not None and lint.monotonic_problem(cu, tokens) is None:
        cuts |= {x for x in cu if 0 < x < tokens}
    s = view.values(lint.SEQ_IDX)
    if s is not None and len(s) == tokens:
        cuts |= {t for t in range(1, tokens) if s[t] != s[t - 1]}
    pos = view.values(lint.POS)
    if pos is not None and len(pos) == tokens:
        cuts |= set(lint.restarts(pos))
    edges = [0, *sorted(cuts), tokens]
    return tuple((a, b) for a, b in zip(edges, edges[1:], strict=False) if b > a)


def clean_meta(segs: tuple[tuple[int, int], ...], accepted: frozenset[str] | None, device: str) -> dict[str, Any]:
    """The boundaries DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True) builds for
    these segments, the keys the forward takes."""
    import torch

    lens = [b - a for a, b in segs]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    meta: dict[str, Any] = {
        "position_ids": torch.cat([torch.arange(n) for n in lens])[None].to(device),
        "cu_seq_lens_q": cu, "cu_seq_lens_k": cu.clone(), "max_length_q": max(lens), "max_length_k": max(lens),
        "seq_idx": torch.cat([torch.full((n,), k, dtype=torch.int32) for k, n in enumerate(lens)])[None].to(device)}
    return {k: v for k, v in meta.items() if accepted is None or k in accepted}


def clean_view(segs: tuple[tuple[int, int], ...]) -> lint.BatchView:
    """The clean control's boundaries as a batch view (what `certain_findings` reads the values from)."""
    tokens = segs[-1][1] if segs else 0
    cu = (0, *(b for _, b in segs))
    sidx = tuple(k for k, (a, b) in enumerate(segs) for _ in range(b - a))
    return lint.BatchView({lint.TOKENS_KEY: lint.Field("int64", (1, tokens)),
                           lint.CU_Q: lint.Field("int32", (len(cu),), cu),
                           lint.SEQ_IDX: lint.Field("int32", (1, tokens), sidx)})


def removed_meta(tokens: int, device: str) -> dict[str, Any]:
    import torch

    return {"position_ids": torch.arange(tokens)[None].to(device)}


def decide(negative: Control, positive: Control) -> Controls:
    """The threshold between the two controls, or none when the positive one is not told apart."""
    noise = max(negative.distance, FLOOR)
    sep = positive.distance / noise
    if negative.error is not None or positive.error is not None or not math.isfinite(sep) or sep < MARGIN:
        return Controls(negative, positive, None, round(sep, 3) if math.isfinite(sep) else None, False, MARGIN)
    return Controls(negative, positive, math.sqrt(noise * positive.distance), round(sep, 3), True, MARGIN)


def separation_words(sep: float | None) -> str:
    return "not measured" if sep is None else f"over {MAX_SAID:g}x" if sep > MAX_SAID else f"{sep:.3g}x"


def control_line(c: Controls) -> str:
    """The one sentence a finding gives of the controls."""
    sep = separation_words(c.separation)
    return (f"negative control ({c.negative.kind}) {c.negative.distance:.2g}, positive control "
            f"({c.positive.kind}) {c.positive.distance:.2g}: {sep} apart")


def cannot_decide(sec: BatchSection, functions: tuple[str, ...]) -> Finding:
    c = sec.controls
    assert c is not None
    why = next((x.error for x in (c.positive, c.negative) if x.error), None)
    said = (f"a control raised ({why[:120]})" if why else
            f"{control_line(c)}, under the {c.margin:g}x this check needs")
    return Finding("packing-control-cannot-decide", Severity.FALLBACK,
                   f"the same tokens with every boundary removed cannot be told from the clean packing at this "
                   f"shape and dtype ({sec.dtype}, {sec.device}): {said}; so the segments' distances "
                   "(above) decide nothing here",
                   "run the check where the positive control separates: longer segments (--collator with "
                   "--lengths), float32 on the CPU, or the full shape", REF, functions)


def _need(fn: str, facts: dict[str, Any]) -> str | None:
    info = facts.get("functions", {}).get(fn)
    return str(info["needs"]) if info else None


def _starts_of(view: lint.BatchView, need: str) -> set[int] | None:
    """The sequence starts the values of the key a kernel gets carry; None when the batch has no such values."""
    tokens = view.tokens
    if need == "seq_idx":
        s = view.values(lint.SEQ_IDX)
        return {t for t in range(1, len(s)) if s[t] != s[t - 1]} if s is not None and len(s) == tokens else None
    key = lint.reference_offsets(view)
    cu = view.values(key) if key else None
    return {x for x in cu if 0 < x < tokens} if cu is not None else None


def certain_findings(reach: list[FunctionReach], view: lint.BatchView, segs: tuple[tuple[int, int], ...],
                     facts: dict[str, Any]) -> list[Finding]:
    """Broken from the reach alone: a recurrent kernel that ran on a row of several segments without a boundary
    it needs, or with values that miss a start of the row."""
    if len(segs) < 2:
        return []
    starts = {a for a, _ in segs[1:]}
    out: list[Finding] = []
    for r in reach:
        need = _need(r.function, facts)
        if need is None or not r.calls or not r.traced or r.error:
            continue
        keys = ALIASES.get(need, (need,))
        if not set(keys) & set(r.passed):
            gave = f" (given {', '.join(r.received)}, which did not reach it)" if r.received else ""
            out.append(Finding(
                "packing-kernel-gets-no-boundary", Severity.BROKEN,
                f"{r.function} ({'kernel' if r.fast else 'torch path'}) ran on a row of {len(segs)} sequences "
                f"and got no {keys[0]}{gave}: its state runs from each sequence into the next (tokens "
                f"{min(starts)} on)",
                f"pass {need} in the batch (DataCollatorWithFlattening(return_flash_attn_kwargs=True, "
                "return_seq_idx=True)) and bind the kernel that takes it", REF_REACH, (r.function,)))
            continue
        have = _starts_of(view, need)
        missed = sorted(starts - have) if have is not None else []
        if missed:
            out.append(Finding(
                "packing-kernel-misses-boundary", Severity.BROKEN,
                f"{r.function} got {keys[0]} whose values put no sequence start at token {missed[0]} "
                f"({len(missed)} of the row's {len(segs) - 1} starts missing; position_ids or the other key show "
                "them): its state runs across them",
                f"build {need} from the same sequences as position_ids (DataCollatorWithFlattening("
                "return_flash_attn_kwargs=True, return_seq_idx=True))", REF_REACH, (r.function,)))
    return out
