"""Packed batches exactly as a job's collator builds them: transformers' DataCollatorWithFlattening with the
flags of each packing mode (matrix/packing.toml `collator`), at lengths on both sides of fla's chunk size.

`verify --packing` measures these batches, so what it measures is what doctor's recommendation produces.
The 12 + 10 token batch that verify built by hand before held the same tensors as the collator's; what made
it report `flash mixed` on the H200 was its forward: an eval forward with the config's use_cache makes a
cache, and with a cache transformers does not look for packed sequences in position_ids, so the sdpa
attention layer attended across the boundary (matrix/packing.toml [cache]). These batches run the training
forward (use_cache=False).
"""

from __future__ import annotations

from typing import Any

# name -> the two sequences' lengths: both shorter than fla's chunk (64), the boundary inside a chunk and the
# second sequence across one, and several chunks each
LENGTHS: dict[str, tuple[int, int]] = {"short": (12, 10), "chunk": (60, 70), "long": (300, 260)}


def collator_flags(mode: str, facts: dict[str, Any]) -> dict[str, bool]:
    """The DataCollatorWithFlattening keyword arguments that give `mode` (none: no collator, {})."""
    return dict(facts["modes"][mode].get("collator", {}))


def collator_call(flags: dict[str, bool]) -> str:
    """How a job writes it: DataCollatorWithFlattening(return_flash_attn_kwargs=True, ...)."""
    return "DataCollatorWithFlattening(" + ", ".join(f"{k}={v}" for k, v in flags.items()) + ")"


def packed_batch(mode: str, seqs: list[list[int]], facts: dict[str, Any], device: Any = None) -> dict[str, Any]:
    """The collator's batch for `seqs` in `mode`, without labels (the comparison needs logits only)."""
    from transformers import DataCollatorWithFlattening

    collator = DataCollatorWithFlattening(**collator_flags(mode, facts))  # type: ignore[no-untyped-call]  # transformers: unannotated
    batch = dict(collator([{"input_ids": s} for s in seqs]))
    batch.pop("labels", None)
    return {k: (v.to(device) if device is not None and hasattr(v, "to") else v) for k, v in batch.items()}


def packed_kwargs(batch: dict[str, Any]) -> tuple[str, ...]:
    """The packing kwargs a batch carries besides input_ids, in a fixed order (for the report)."""
    return tuple(k for k in ("position_ids", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k",
                             "seq_idx") if k in batch)
