"""TRL's padding-free SFT collator, as a job builds it, for `kernelcheck verify --packing`.

As --collator (run from this folder, trl on the path):
    kernelcheck verify --model M --packing --collator trl_padding_free:collate --lengths FILE
As a saved batch: `python trl_padding_free.py OUT.pt 40 70 30` writes torch.save(collate(examples), OUT.pt) for
examples of those lengths (token ids 1..n), for `--batch OUT.pt`.

trl.trainer.sft_trainer.DataCollatorForLanguageModeling(pad_token_id, padding_free=True) is what SFTTrainer uses
with SFTConfig(padding_free=True): one row, position_ids restarting at each example, no attention_mask; from trl
1.16.0 also cu_seq_lens_q/k, max_length_q/k and seq_idx.
"""

from __future__ import annotations

import sys

import torch
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

collate = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)

if __name__ == "__main__":
    out, lengths = sys.argv[1], [int(n) for n in sys.argv[2:]]
    torch.save(dict(collate([{"input_ids": list(range(1, n + 1))} for n in lengths])), out)
