"""`verify --packing --benchmark [--lengths FILE]`: what packing buys, measured.

One training step (forward, a next-token loss, backward, AdamW) on the same examples two ways:
- padded: one row per example, padded to the longest, with the attention mask (what a padding collator does);
- packed: one row of all examples, DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)
  (cu_seq_lens and seq_idx: the kernels keep the sequences apart). Where transformers' torch path refuses those
  (no fla-core / causal-conv1d: the CPU), the packed row carries position_ids only and `packed_with` says so:
  the time is then the torch path's, for the code path, not a figure to quote.
On a GPU the model is verify's full shape (one layer of each type at the real width: the 27B Gated DeltaNet at
hidden 5120), in bfloat16; on a CPU the tiny shape. Beside the ratio: padding's waste for the same lengths as one
batch (the `padding` command's numbers: padding fraction and the speedup bound if time scaled with tokens).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from kernelcheck.core.errors import BadInput
from kernelcheck.report.packing_batch import Payoff
from kernelcheck.verify import layers

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

# A long-tailed SFT mix (chat-like: most examples short, a few long), 16 examples, 13,186 tokens, longest 4,096:
# padded to the longest they fill 65,536 tokens (80% padding). The CPU runs it divided by CPU_SCALE.
DEFAULT_LENGTHS = (4096, 2210, 1480, 1105, 870, 700, 590, 480, 400, 330, 270, 220, 170, 130, 90, 45)
CPU_SCALE = 32
MAX_PADDED_TOKENS = 131_072  # a GPU step's padded tokens beyond this is refused before it runs out of memory


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _batches(lengths: list[int], vocab: int, device: str, flash: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    import torch
    from transformers import DataCollatorWithFlattening

    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(0, vocab, (n,), generator=gen) for n in lengths]
    top = max(lengths)
    ids = torch.zeros(len(seqs), top, dtype=torch.long)
    mask = torch.zeros(len(seqs), top, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    padded = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    flags = {"return_flash_attn_kwargs": True, "return_seq_idx": True} if flash else {}
    packed = dict(DataCollatorWithFlattening(**flags)([{"input_ids": s.tolist()} for s in seqs]))  # type: ignore[no-untyped-call]  # transformers: unannotated

    def move(b: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.to(device) if hasattr(v, "to") else v) for k, v in b.items()}

    return move(padded), move(packed)


def _step_time(lm: Any, batch: dict[str, Any], opt: Any, device: str, steps: int) -> float:
    """Median seconds of a training step over `steps` after one warm-up."""
    times = []
    for i in range(steps + 1):
        _sync(device)
        t0 = time.perf_counter()
        loss = lm(**batch, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(device)
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _packed_time(lm: Any, packed: dict[str, Any], fallback: dict[str, Any], opt: Any, device: str,
                 steps: int) -> tuple[float, str]:
    try:
        return _step_time(lm, packed, opt, device, steps), "cu_seq_lens + seq_idx"
    except ValueError as exc:  # transformers' torch path refuses cu_seqlens/seq_idx
        if "packed sequences" not in str(exc):
            raise
        return _step_time(lm, fallback, opt, device, steps), "position_ids (torch path: timing only)"


def measure(query: str, lengths: list[int] | None, steps: int = 3, *, m: Matrix) -> Payoff:
    """One training step padded and packed, timed on this machine's device."""
    import torch

    from kernelcheck.integrations import transformers_models
    from kernelcheck.integrations.transformers_logs import quiet_fallback_lines
    from kernelcheck.padding.waste import Rule
    from kernelcheck.padding.waste import measure as waste

    model = transformers_models.resolve(query, m=m)
    gpu = torch.cuda.is_available()
    device, dtype, shape = ("cuda:0", "bfloat16", "full") if gpu else ("cpu", "float32", "tiny")
    lens = list(lengths) if lengths else [max(2, n // (1 if gpu else CPU_SCALE)) for n in DEFAULT_LENGTHS]
    lens = [n for n in lens if n > 0]
    if not lens:
        raise BadInput("--lengths holds no positive length: nothing to time. Nothing was run.")
    if gpu and len(lens) * max(lens) > MAX_PADDED_TOKENS:
        raise BadInput(f"--lengths: {len(lens)} examples padded to {max(lens)} tokens is {len(lens) * max(lens):,} "
                       f"tokens, more than one step of the full-width layers holds ({MAX_PADDED_TOKENS:,}); give "
                       "fewer or shorter examples (one batch of the job). Nothing was run.")
    w = waste(lens, Rule("batch", len(lens)))
    with quiet_fallback_lines():
        built = layers.build(model, shape, device, dtype, None, m=m)
        lm = built.model.train()
        opt = torch.optim.AdamW(lm.parameters(), lr=1e-6)
        vocab = int(lm.get_input_embeddings().num_embeddings)
        padded, packed = _batches(lens, vocab, device, flash=True)
        _, pos_only = _batches(lens, vocab, device, flash=False)
        padded_s = _step_time(lm, padded, opt, device, steps)
        packed_s, carried = _packed_time(lm, packed, pos_only, opt, device, steps)
    name = torch.cuda.get_device_name(0) if gpu else "cpu"
    return Payoff(shape, name, len(lens), w.real_tokens, w.padded_tokens, round(padded_s, 6), round(packed_s, 6),
                  round(w.padding_fraction, 6), round(w.packing_speedup_bound, 4), carried)
