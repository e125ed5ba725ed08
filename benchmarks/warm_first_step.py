#!/usr/bin/env python3
"""The job's first training step, timed in a fresh process: the model's real layers (kernelcheck's verify layers at
--shape, one layer of each type, random weights), one forward with labels + backward, as a trainer's first step.
Whatever the JITs compile lands in the folders the environment names (TRITON_CACHE_DIR, TILELANG_CACHE_DIR): run it
with an empty folder (cold), again (warm), and pointed at a folder `kernelcheck warm` baked
(benchmarks/gpu/gpu_warm.sh).

    python3 benchmarks/warm_first_step.py --model qwen3.8-27b --shape full --tokens 8192

One JSON line: {"first_step_s", "second_step_s", "build_s", "import_s", "device", "cache_entries_added"}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

T0 = time.perf_counter()


def entries() -> int:
    n = 0
    for var in ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR"):
        folder = os.environ.get(var)
        if folder and Path(folder).is_dir():
            n += sum(1 for _ in Path(folder).iterdir())
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3.8-27b")
    ap.add_argument("--shape", default="full", choices=["tiny", "full"])
    ap.add_argument("--tokens", type=int, default=8192)
    args = ap.parse_args()
    import torch

    from kernelcheck.core import entry, models
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import layers
    from kernelcheck.verify.run import attn_impl

    m = entry.matrix()
    model = transformers_models.resolve(args.model, m=m)
    import_s = time.perf_counter() - T0
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    t = time.perf_counter()
    built = layers.build(model, args.shape, device, "bfloat16" if device != "cpu" else "float32",
                         attn_impl(model, models.needs(model, None, m=m)), m=m)
    build_s = time.perf_counter() - t
    ids = torch.randint(0, int(built.model.config.vocab_size), (1, args.tokens), device=device)
    before = entries()

    def step() -> float:
        t = time.perf_counter()
        built.model.train()
        built.model.zero_grad(set_to_none=True)
        built.model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        if device != "cpu":
            torch.cuda.synchronize()
        return round(time.perf_counter() - t, 3)

    first = step()
    second = step()
    print(json.dumps({"first_step_s": first, "second_step_s": second, "build_s": round(build_s, 3),
                      "import_s": round(import_s, 3), "device": device, "shape": args.shape, "tokens": args.tokens,
                      "cache_entries_added": entries() - before}))


if __name__ == "__main__":
    main()
