"""What a job really does under transformers 5.25's Hub-kernel default, per model type and device: a tiny model
of the type is built from its config, saved, loaded back with `AutoModelForCausalLM.from_pretrained(FOLDER)` (no
use_kernels argument: the release's default), moved to the device and put through one train step (forward +
backward + SGD step). It imports nothing of kernelcheck.

    python benchmarks/hub_default_load_truth.py --type llama --folder /tmp/tiny-llama --device cuda

Prints one JSON object: {type, device, cuda_available, loaded, load_error, step_ok, step_error, versions, env}.
Errors are the exception's type and first line. Run it with HF_HUB_OFFLINE=1 and an empty HF cache for the case
a login node or a docker build stage predicts (benchmarks/gpu_hub_default_load.sh).
"""

from __future__ import annotations

import argparse
import json
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def tiny_config(model_type: str) -> Any:
    from transformers import LlamaConfig, Qwen3_5TextConfig

    if model_type == "llama":
        return LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=32)
    if model_type == "qwen3_5":
        return Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=2,
                                 linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                                 layer_types=["linear_attention", "full_attention"])
    raise SystemExit(f"unknown --type {model_type}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--type", required=True, choices=("llama", "qwen3_5"))
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    if not (args.folder / "config.json").is_file():
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(tiny_config(args.type)).save_pretrained(args.folder)
    versions: dict[str, str | None] = {}
    for dist in ("torch", "transformers", "kernels", "huggingface_hub", "fla-core", "causal-conv1d", "triton"):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = None
    result: dict[str, Any] = {
        "type": args.type, "device": args.device, "cuda_available": torch.cuda.is_available(),
        "torch_cuda": torch.version.cuda, "loaded": False, "load_error": None, "step_ok": False, "step_error": None,
        "versions": versions,
        "env": {k: os.environ.get(k) for k in ("USE_HUB_KERNELS", "HF_HUB_OFFLINE", "HF_HOME", "CUDA_VISIBLE_DEVICES")}}
    try:
        model = AutoModelForCausalLM.from_pretrained(args.folder)
        result["loaded"] = True
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        result["load_error"] = _first_line(exc)
        print(json.dumps(result))
        return
    try:
        dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
        model.to(device=args.device, dtype=dtype).train()
        ids = torch.randint(0, model.config.vocab_size, (1, 64), device=args.device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        if args.device == "cuda":
            torch.cuda.synchronize()
        result["step_ok"] = bool(torch.isfinite(out.loss).item())
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        result["step_error"] = _first_line(exc)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
