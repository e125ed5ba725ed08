"""Batching rules and the padding they cost, computed in one streaming pass.

Rules (examples taken in file order, as a sequential sampler does):
- `budget:N`: pad to the longest in the batch; a batch grows while (size+1) * longest <= N tokens.
- `batch:B`: fixed B examples a batch, padded to the longest.
- `packing:N`: examples concatenated into rows of N tokens (padding-free): no padding.
The speedup bound from packing is padded tokens / real tokens: the step cost if compute scales with tokens.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kernelcheck.core.errors import BadInput

log = logging.getLogger(__name__)


MAX_RULE_VALUE = 10 ** 12  # tokens or examples in one batch: far above any real one, far below int64's end


@dataclass(frozen=True)
class Rule:
    kind: str  # budget | batch | packing
    value: int

    @classmethod
    def parse(cls, text: str) -> Rule:
        kind, _, num = text.partition(":")
        if kind not in ("budget", "batch", "packing") or not (num.isascii() and num.isdigit()) or int(num) <= 0:
            raise BadInput(f"--batching {text!r} is not a batching rule. Use budget:TOKENS (pad to the longest "
                           "under a token budget, e.g. budget:8192), batch:SIZE (fixed batch size, e.g. batch:8) "
                           "or packing:TOKENS (padding-free rows of that many tokens).")
        if int(num) > MAX_RULE_VALUE:
            raise BadInput(f"--batching {text!r}: {num} is more than any batch holds (at most {MAX_RULE_VALUE:,}); "
                           "give the token budget, batch size or row length of the real job, e.g. budget:8192.")
        return cls(kind, int(num))

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"


@dataclass
class Waste:
    rule: Rule
    examples: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    steps: int = 0
    longest: int = 0  # the longest example in the data, before a rule's limit counts it at that limit
    truncated: int = 0
    by_length: Counter[int] = field(default_factory=Counter)  # length -> examples
    waste_by_length: Counter[int] = field(default_factory=Counter)  # length -> pad tokens it carried
    pad_to: Counter[int] = field(default_factory=Counter)  # a batch's longest length -> batches padded to it

    @property
    def pad_tokens(self) -> int:
        return self.padded_tokens - self.real_tokens

    @property
    def padding_fraction(self) -> float:
        return self.pad_tokens / self.padded_tokens if self.padded_tokens else 0.0

    @property
    def wasted_per_step(self) -> float:
        return self.pad_tokens / self.steps if self.steps else 0.0

    @property
    def median(self) -> int:
        """The median example length (the lower one for an even count)."""
        half, seen = (self.examples + 1) // 2, 0
        for n in sorted(self.by_length):
            seen += self.by_length[n]
            if seen >= half:
                return n
        return self.longest

    @property
    def packing_speedup_bound(self) -> float:
        return self.padded_tokens / self.real_tokens if self.real_tokens else 1.0


def _close(w: Waste, batch: list[int]) -> None:
    if not batch:
        return
    top = max(batch)
    w.steps += 1
    w.padded_tokens += top * len(batch)
    w.pad_to[top] += 1
    for n in batch:
        w.waste_by_length[n] += top - n


def measure(lengths: Iterable[int], rule: Rule) -> Waste:
    """One pass; memory grows with the number of distinct lengths only."""
    w = Waste(rule)
    batch: list[int] = []
    top = 0
    row = 0
    for n in lengths:
        if n <= 0:
            continue
        w.longest = max(w.longest, n)
        if rule.kind != "batch" and n > rule.value:
            w.truncated += 1
            n = rule.value
        w.examples += 1
        w.real_tokens += n
        w.by_length[n] += 1
        if rule.kind == "packing":
            row += n
            w.steps += row // rule.value
            row %= rule.value
            continue
        full = len(batch) >= rule.value if rule.kind == "batch" else (len(batch) + 1) * max(top, n) > rule.value
        if batch and full:
            _close(w, batch)
            batch, top = [], 0
        batch.append(n)
        top = max(top, n)
    if rule.kind == "packing":
        w.steps += 1 if row else 0
        w.padded_tokens = w.real_tokens
    else:
        _close(w, batch)
    return finish(w)


def finish(w: Waste) -> Waste:
    """The end of a measure (this one and the vectorized one): no example is bad input; truncation is logged."""
    if not w.examples:
        raise BadInput("the data holds no example with a positive length: nothing to measure. Check the file "
                       "and its length column.")
    if w.truncated:
        log.info("%d examples longer than %s were counted at the limit", w.truncated, w.rule)
    return w


def as_dict(w: Waste) -> dict[str, object]:
    return {"rule": str(w.rule), "examples": w.examples, "steps": w.steps, "real_tokens": w.real_tokens,
            "padded_tokens": w.padded_tokens, "pad_tokens": w.pad_tokens,
            "padding_fraction": round(w.padding_fraction, 6), "wasted_tokens_per_step": round(w.wasted_per_step, 3),
            "packing_speedup_bound": round(w.packing_speedup_bound, 4), "longest": w.longest,
            "median": w.median, "truncated_examples": w.truncated}


def render_text(w: Waste, source: str, plot: Mapping[str, object] | None = None) -> str:
    """The text: what was measured, the tokens, the packing bound, where the plot went; last the padding line
    (what --quiet prints)."""
    lines = [f"kernelcheck padding: {source} ({w.examples:,} examples, longest {w.longest:,} tokens, "
             f"median {w.median:,})",
             f"  batching     {w.rule}  ->  {w.steps:,} steps",
             f"  tokens       {w.real_tokens:,} real, {w.padded_tokens:,} computed, {w.pad_tokens:,} padding "
             f"({w.wasted_per_step:,.1f} wasted per step)",
             f"  packing      at most {w.packing_speedup_bound:.2f}x faster if step time scales with tokens "
             "(padding-free)"]
    if w.truncated:
        lines.append(f"  note         {w.truncated:,} examples longer than {w.rule.value} counted at that length")
    if w.rule.kind != "packing" and w.padding_fraction > 0.1:
        lines.append("  fix          pack (padding-free): for linear-attention/conv/Mamba models pass cu_seq_lens "
                     "and seq_idx, see `kernelcheck doctor --model M --packing flash`")
    if plot:
        lines.append(f"  plot         {plot['file']} ({plot['how']}): examples per length bin, and the tokens each "
                     f"bin costs with the padding in red ({plot['bin_text']})")
    lines.append(f"padding: {w.padding_fraction:.1%} of computed tokens under {w.rule} "
                 f"(packing at most {w.packing_speedup_bound:.2f}x faster)")
    return "\n".join(lines)
