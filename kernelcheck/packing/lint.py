"""Lint a packed batch's metadata before anything runs: the offsets, segment ids and position ids a job's own
collator produced, and which keys the model's forward accepts.

Pure: a `BatchView` holds each key's dtype, shape and (for integer tensors) its values flattened; the keys the
forward accepts are passed in (verify reads them from the real forward's signature). Each problem is a Finding
with an id, a message naming the offending index and a fix. The checks, with the bugs they reproduce:

- packing-cu-seqlens-not-monotonic: offsets start at 0, never decrease, end at the token count;
- packing-zero-length-segment: a repeated offset (AReaL#1103's duplicated tail entry crashes causal_conv1d_fn;
  Megatron-LM#3282 pads cu_seqlens with repeated final offsets for static CUDA-graph shapes);
- packing-padded-offsets: SP/CP-padded offsets (`cu_seqlens_q_padded`, verl#6559, mcore-bridge#162), which
  transformers never reads: whether the tokens are laid out at them decides what cu_seq_lens_q must hold;
- packing-seq-idx-mismatch: seq_idx (the conv's and Mamba's boundaries) must agree with cu_seqlens (fla's);
  VeOmni#1076 / VeOmni#845: empty segments make the two encodings disagree;
- packing-position-ids-only: position_ids restart but neither cu_seq_lens nor seq_idx reaches the model;
- packing-attention-mask-hides-boundaries: an attention_mask beside restarting position_ids (the attention then
  finds no boundaries; TRL's padding-free collator leaves it out for this reason);
- packing-metadata-dropped: keys the forward does not take by name (no transformers code reads them; they ride
  along in **kwargs).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kernelcheck.core.status import Finding, Severity

CU_Q, CU_K, SEQ_IDX, POS, MASK = "cu_seq_lens_q", "cu_seq_lens_k", "seq_idx", "position_ids", "attention_mask"
TOKENS_KEY = "input_ids"
REF = {
    "packing-cu-seqlens-not-monotonic": "flash-attn varlen / fla cu_seqlens contract: [0, ..., total], "
                                        "non-decreasing",
    "packing-zero-length-segment": "AReaL#1103 (duplicated tail offset crashes causal_conv1d_fn); Megatron-LM#3282 "
                                   "(CUDA-graph THD pads cu_seqlens with repeated final offsets)",
    "packing-padded-offsets": "verl#6559, mcore-bridge#162 (SP/CP needs cu_seqlens_q_padded)",
    "packing-seq-idx-mismatch": "VeOmni#1076, VeOmni#845 (empty segments: the two chunk-index encodings disagree)",
    "packing-position-ids-only": "transformers#46333, a docs PR (no position_ids-only path for linear attention)",
    "packing-metadata-dropped": "transformers TransformersKwargs (the packed keys a forward reads)",
    "packing-attention-mask-hides-boundaries": "transformers masking_utils._preprocess_mask_arguments "
                                               "(find_packed_sequence_indices only without a 2D attention_mask); TRL "
                                               "sft_trainer: padding-free must not create an attention_mask",
}


@dataclass(frozen=True)
class Field:
    """One batch entry: its dtype (torch's name, `int32`), shape and, for an integer tensor, its values."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple[int, ...] | None = None


@dataclass(frozen=True)
class BatchView:
    fields: Mapping[str, Field]

    @property
    def tokens(self) -> int:
        ids = self.fields.get(TOKENS_KEY)
        n = 1
        for d in ids.shape if ids is not None else (0,):
            n *= d
        return n

    def values(self, key: str) -> tuple[int, ...] | None:
        f = self.fields.get(key)
        return f.values if f is not None else None


def is_offsets(key: str) -> bool:
    """cu_seq_lens_q/k (transformers), cu_seqlens, cu_seqlens_q/_k/_kv (Megatron, verl, slime ...)."""
    return key.startswith("cu_seq")


def is_padded(key: str) -> bool:
    return is_offsets(key) and "padded" in key


@dataclass(frozen=True)
class Problem:
    """One lint hit: its finding, and the key and index it is about (what tests and readers take)."""

    finding: Finding
    key: str
    index: int | None

    @property
    def id(self) -> str:
        return self.finding.id


def monotonic_problem(v: tuple[int, ...], tokens: int) -> tuple[int, str] | None:
    """(index, what) of the first break of the offsets contract, or None."""
    if not v:
        return 0, "is empty"
    if v[0] != 0:
        return 0, f"starts at {v[0]}, not 0"
    for i in range(1, len(v)):
        if v[i] < v[i - 1]:
            return i, f"decreases: {v[i - 1]} then {v[i]}"
    if v[-1] != tokens:
        return len(v) - 1, f"ends at {v[-1]}, but the batch holds {tokens} tokens"
    return None


def _not_monotonic(key: str, v: tuple[int, ...], tokens: int) -> Problem | None:
    got = monotonic_problem(v, tokens)
    if got is None:
        return None
    i, what = got
    return Problem(Finding("packing-cu-seqlens-not-monotonic", Severity.BROKEN,
                    f"{key}[{i}] {what}: the offsets must start at 0, never decrease and end at the token count "
                    f"({tokens}); kernels given these offsets read the wrong tokens or past the end",
                    f"build {key} as [0, *cumsum(lengths)] over the sequences actually packed into input_ids",
                    REF["packing-cu-seqlens-not-monotonic"]), key, i)


def _zero_length(key: str, v: tuple[int, ...], tokens: int) -> Problem | None:
    rep = [i for i in range(1, len(v)) if v[i] == v[i - 1]]
    if not rep:
        return None
    tail = all(v[i] == v[-1] for i in rep) and v[-1] == tokens and rep[-1] == len(v) - 1
    where = ("tail padding: the final offset is repeated" if tail else "a repeated offset")
    return Problem(Finding("packing-zero-length-segment", Severity.WARNING,
                    f"{key}[{rep[0]}] repeats {v[rep[0]]} ({where}; {len(rep)} zero-length segment"
                    f"{'s' if len(rep) > 1 else ''}): causal_conv1d_fn can crash on an empty segment, and seq_idx "
                    "built by counting segments then disagrees with the offsets",
                    f"drop repeated offsets before the forward ({key} = torch.unique_consecutive({key})); for "
                    "static shapes pad with a real one-token dummy segment instead of repeating the last offset",
                    REF["packing-zero-length-segment"]), key, rep[0])


def _padded(key: str, v: tuple[int, ...], view: BatchView) -> Problem:
    tokens = view.tokens
    cu = view.values(CU_Q)
    first: int | None = None
    if v and v[-1] == tokens and cu is not None and tuple(cu) != tuple(v):
        i = next((k for k, (a, b) in enumerate(zip(cu, v, strict=False)) if a != b), min(len(cu), len(v)) - 1)
        first = i
        how = (f"input_ids are laid out at the padded offsets ({key}[-1] = {tokens} tokens) but {CU_Q} holds other "
               f"offsets, first at index {i} ({cu[i] if i < len(cu) else '-'} vs {v[i] if i < len(v) else '-'}): "
               "every boundary after the first padded sequence is shifted")
        fix = (f"pass the padded offsets as {CU_Q}/{CU_K} (each sequence then ends in its pad tokens, which causal "
               "kernels never read back into real tokens; mask them out of the loss)")
    elif v and v[-1] == tokens:
        how = (f"input_ids are laid out at the padded offsets and {CU_Q} holds them: each sequence carries its pad "
               "tokens at its end, inside its own segment")
        fix = "nothing to change for the kernels; keep the pad positions out of the loss (labels -100)"
    else:
        how = (f"input_ids are not laid out at them ({key}[-1] = {v[-1] if v else '-'}, {tokens} tokens): they "
               "describe the SP/CP split only")
        fix = f"nothing here; the SP/CP code must split with {key} and hand each rank its own {CU_Q}"
    return Problem(Finding("packing-padded-offsets", Severity.WARNING,
                    f"{key} holds SP/CP-padded offsets; transformers' forward does not read it, only {CU_Q}/{CU_K}: "
                    f"{how}", fix, REF["packing-padded-offsets"]), key, first)


def _expected_segment_ids(cu: tuple[int, ...]) -> list[int]:
    """The collator's seq_idx for offsets `cu`: 0, 1, ... over the non-empty segments."""
    out: list[int] = []
    k = 0
    for a, b in zip(cu, cu[1:], strict=False):
        if b > a:
            out.extend([k] * (b - a))
            k += 1
    return out


def _seq_idx_mismatch(view: BatchView, cu_key: str, cu: tuple[int, ...]) -> Problem | None:
    s = view.values(SEQ_IDX)
    tokens = view.tokens
    if s is None or monotonic_problem(cu, tokens) is not None:
        return None
    want = _expected_segment_ids(cu)
    by_s = {t for t in range(1, len(s)) if s[t] != s[t - 1]}
    by_cu = {x for x in cu if 0 < x < tokens}
    moved = sorted(by_s ^ by_cu)
    if moved:
        t = moved[0]
        what = (f"seq_idx starts a sequence at token {t} where {cu_key} has none" if t in by_s
                else f"{cu_key} starts a sequence at token {t} where seq_idx has none")
        msg = (f"{what} (seq_idx[{t}] = {s[t]}, the offsets put it in segment {want[t]}): the conv (seq_idx) and the "
               "Gated DeltaNet kernel (cu_seqlens) keep different sequences apart")
    else:
        t = next((i for i, (a, b) in enumerate(zip(s, want, strict=False)) if a != b), -1)
        if t < 0:
            return None
        msg = (f"seq_idx[{t}] = {s[t]} numbers the segment {want[t]} by {cu_key} (an empty segment counted on one side "
               "only): the boundaries agree, so the conv keeps the same sequences apart, but code that indexes by "
               "seq_idx (per-sequence states, chunk indices) takes the wrong entry")
    return Problem(Finding("packing-seq-idx-mismatch", Severity.WARNING, msg,
                           f"derive seq_idx from the same offsets: seq_idx[t] = k for {cu_key}[k] <= t < "
                           f"{cu_key}[k+1], counting only non-empty segments (DataCollatorWithFlattening("
                           "return_flash_attn_kwargs=True, return_seq_idx=True) does)",
                           REF["packing-seq-idx-mismatch"]), SEQ_IDX, t)


def restarts(pos: tuple[int, ...]) -> list[int]:
    """Token indices (> 0) where position_ids start a new sequence (back to 0, or down)."""
    return [t for t in range(1, len(pos)) if pos[t] == 0 or pos[t] < pos[t - 1]]


def _position_ids_only(view: BatchView, accepted: frozenset[str] | None) -> Problem | None:
    pos = view.values(POS)
    if pos is None:
        return None
    r = restarts(pos)
    reaching = {k for k in view.fields if accepted is None or k in accepted}
    if not r or reaching & {CU_Q, CU_K, SEQ_IDX}:
        return None
    return Problem(Finding("packing-position-ids-only", Severity.WARNING,
                    f"position_ids restart at token {r[0]} ({len(r) + 1} sequences in the row) but neither "
                    f"{CU_Q} nor seq_idx reaches the model: attention finds the boundaries from position_ids, the "
                    "Gated DeltaNet and conv layers cannot, so their state runs across every boundary",
                    "DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True) (TRL: "
                    "padding_free from trl 1.16.0, which passes cu_seq_lens and seq_idx; earlier releases pass "
                    "position_ids only)",
                    REF["packing-position-ids-only"]), POS, r[0])


def _mask_hides(view: BatchView) -> Problem | None:
    pos = view.values(POS)
    if view.values(MASK) is None or pos is None or not restarts(pos):
        return None
    r = restarts(pos)
    return Problem(Finding("packing-attention-mask-hides-boundaries", Severity.WARNING,
                           f"the batch carries an attention_mask and position_ids that restart at token {r[0]}: with "
                           "a 2D attention_mask transformers does not look for packed sequences in position_ids, so "
                           "sdpa, eager and flex attention attend across every boundary (flash attention unpads by the "
                           "mask and ignores the position_ids too)",
                           "drop attention_mask from packed batches (DataCollatorWithFlattening returns none); the "
                           "boundaries travel in position_ids, cu_seq_lens_q/k and seq_idx",
                           REF["packing-attention-mask-hides-boundaries"]), MASK, r[0])


def _dropped(view: BatchView, accepted: frozenset[str] | None) -> Problem | None:
    if accepted is None:
        return None
    gone = [k for k in view.fields if k not in accepted and not is_padded(k)]
    if not gone:
        return None
    shapes = ", ".join(f"{k} {tuple(view.fields[k].shape)}" for k in gone)
    it = "it" if len(gone) == 1 else "them"
    renames = [k for k in gone if is_offsets(k)]
    fix = (f"rename {', '.join(renames)} to {CU_Q}/{CU_K} (the names transformers reads); " if renames else "")
    return Problem(Finding("packing-metadata-dropped", Severity.WARNING,
                    f"the model's forward does not take {shapes}: no transformers code reads {it} by that "
                    f"name; {it} rides along in **kwargs to whatever takes **kwargs (which keys reached each kernel "
                    "shows where), so its boundaries are lost or land under a name the kernel does not expect",
                    fix + "pass the boundaries under the forward's own keys: cu_seq_lens_q, cu_seq_lens_k, "
                    "max_length_q, max_length_k, seq_idx, position_ids",
                    REF["packing-metadata-dropped"]), gone[0], None)


def lint(view: BatchView, accepted: Iterable[str] | None = None, stateful: bool = True) -> list[Problem]:
    """Every metadata problem of the batch, in a fixed order. `accepted`: the forward's keys (None: unknown);
    `stateful`: the model has layers that need cu_seqlens or seq_idx (Gated DeltaNet, conv, Mamba: the functions
    of matrix/packing.toml); without them position_ids alone keep packed sequences apart."""
    acc = frozenset(accepted) if accepted is not None else None
    out: list[Problem] = []
    tokens = view.tokens
    seen: set[tuple[int, ...]] = set()
    for key in sorted(view.fields, key=lambda k: (k != CU_Q, k != CU_K)):  # q first, then k, then the file's order
        f = view.fields[key]
        if not is_offsets(key) or f.values is None or f.values in seen:
            continue  # cu_seq_lens_k equal to cu_seq_lens_q: one finding, on q
        seen.add(f.values)
        if is_padded(key):
            out.append(_padded(key, f.values, view))
            continue
        for check in (_not_monotonic, _zero_length):
            got = check(key, f.values, tokens)
            if got is not None:
                out.append(got)
    cu_key = reference_offsets(view)
    if cu_key is not None:
        mis = _seq_idx_mismatch(view, cu_key, view.values(cu_key) or ())
        if mis is not None:
            out.append(mis)
    for extra in (_position_ids_only(view, acc) if stateful else None, _mask_hides(view), _dropped(view, acc)):
        if extra is not None:
            out.append(extra)
    return out


def reference_offsets(view: BatchView) -> str | None:
    """The offsets key the kernels take: cu_seq_lens_q, else another unpadded cu_seq* key."""
    if view.values(CU_Q) is not None:
        return CU_Q
    return next((k for k in view.fields if is_offsets(k) and not is_padded(k) and view.values(k) is not None), None)


def segments(view: BatchView) -> tuple[tuple[tuple[int, int], ...], str]:
    """The sequences the job packed, as (start, end) token ranges, and where they were read from: valid offsets,
    else seq_idx, else position_ids restarts, else the whole row as one."""
    tokens = view.tokens
    key = reference_offsets(view)
    cu = view.values(key) if key else None
    if cu is not None and monotonic_problem(cu, tokens) is None:
        return tuple((a, b) for a, b in zip(cu, cu[1:], strict=False) if b > a), key or CU_Q
    s = view.values(SEQ_IDX)
    if s is not None and len(s) == tokens:
        cuts = [t for t in range(1, tokens) if s[t] != s[t - 1]]
        return _ranges(cuts, tokens), SEQ_IDX
    pos = view.values(POS)
    if pos is not None and len(pos) == tokens:
        return _ranges(restarts(pos), tokens), POS
    return ((0, tokens),), TOKENS_KEY


def _ranges(cuts: list[int], tokens: int) -> tuple[tuple[int, int], ...]:
    edges = [0, *cuts, tokens]
    return tuple((a, b) for a, b in zip(edges, edges[1:], strict=False) if b > a)


def accepted_keys(forward: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword arguments a forward reads: its named parameters and the keys of its `**kwargs:
    Unpack[TypedDict]` (transformers' TransformersKwargs). None when its **kwargs takes anything untyped."""
    params = inspect.signature(forward).parameters.values()
    names = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"}
    var_kw = next((p for p in params if p.kind == p.VAR_KEYWORD), None)
    if var_kw is None:
        return frozenset(names)
    ann = var_kw.annotation
    if typing.get_origin(ann) is typing.Unpack:
        td = typing.get_args(ann)[0]
        keys = getattr(td, "__required_keys__", frozenset()) | getattr(td, "__optional_keys__", frozenset())
        return frozenset(names | set(keys or getattr(td, "__annotations__", {})))
    return None
