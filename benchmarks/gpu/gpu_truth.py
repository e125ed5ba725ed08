"""The truth column of the H200 differential: what a real job does, independent of kernelcheck.

A tiny Qwen3.5 (1 Gated DeltaNet + 1 full-attention layer, docs/facts.md section 1) is built from its config,
saved with save_pretrained and loaded back with AutoModelForCausalLM.from_pretrained, exactly as a job
loads it (transformers 5.25 turns Hub kernels on there). Then, on the GPU:
- train: one forward + backward (bf16), under the profiler;
- infer: a prefill and one cached decode step (no grad), under the profiler.
For each phase it records whether it crashed (and the error), and which kernels ran, grouped:
fla's Triton kernels, causal-conv1d's, TileLang's (fla's TileLang backend), FlashQLA's, and the pure-torch
fallback's small elementwise kernels. fla logs its backend choice at INFO: those lines are kept.
It imports nothing of kernelcheck.

    python benchmarks/gpu/gpu_truth.py --model-dir /tmp/tiny-q35 --out truth.json [--save-only]

Prints one JSON object (also written to --out): {versions, load: {ok, error}, train: {...}, infer: {...},
path: {train, infer}} where path is "fast" (the GDN and conv kernels ran), "fallback" (a torch path ran),
or "crash".
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import sys
import traceback
from typing import Any

GROUPS = {
    "causal_conv1d": ("causal_conv1d",),
    "tilelang": ("tilelang", "tl::", "tvm"),
    "flashqla": ("flashqla", "flash_qla", "qla"),
    "fla_triton": ("chunk_", "fused_recurrent", "l2norm", "recompute_w_u", "solve_tril", "merge_16x16",
                   "prepare_wy", "fused_gdn", "gated_delta", "kkt"),
    "torch_elementwise": ("elementwise_kernel", "vectorized_", "reduce_kernel", "triu_tril", "conv_depthwise"),
}


def tiny_config() -> Any:
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"],
    )


def group(name: str) -> str:
    low = name.lower()
    if low in ("kernel", "main_kernel", "kernel_kernel"):  # TileLang names its JIT kernels so
        return "tilelang"
    for key, needles in GROUPS.items():
        if any(n in low for n in needles):
            return key
    return "other"


def profiled(fn: Any) -> dict[str, Any]:
    """Run fn once plainly (JIT compiles happen here: TileLang's compile under the profiler hung on the H200),
    then once under the profiler to see which kernels ran."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out: dict[str, Any] = {"ok": False, "error": None}
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the truth is whatever the job would see
        out["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        out["where"] = traceback.format_exc().splitlines()[-6:]
        return out
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        out["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the truth is whatever the job would see
        out["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        out["where"] = traceback.format_exc().splitlines()[-6:]
        return out
    names: collections.Counter[str] = collections.Counter()
    for ev in prof.events():
        on_gpu = getattr(ev, "device_type", None) is not None and str(ev.device_type).endswith("CUDA")
        if on_gpu and not getattr(ev, "is_user_annotation", False):
            names[ev.name] += 1
    groups: collections.Counter[str] = collections.Counter()
    for n, c in names.items():
        groups[group(n)] += c
    out["kernels"] = sum(names.values())
    out["groups"] = dict(groups)
    out["top"] = [[n[:120], c] for n, c in names.most_common(25)]
    out["non_torch"] = sorted({n[:120] for n in names if group(n) in ("causal_conv1d", "tilelang", "flashqla",
                                                                      "fla_triton")})[:60]
    return out


def path_of(phase: dict[str, Any]) -> str:
    if not phase.get("ok"):
        return "crash"
    g = phase.get("groups", {})
    gdn = g.get("fla_triton", 0) + g.get("tilelang", 0) + g.get("flashqla", 0)
    conv = g.get("causal_conv1d", 0)
    return "fast" if gdn and conv else ("fast-gdn-only" if gdn else ("fast-conv-only" if conv else "fallback"))


def keep_logs() -> list[str]:
    """fla, tilelang and transformers' Hub layer say which backend they chose only at INFO: keep those lines."""
    kept: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(f"{record.name}: {record.getMessage()}"[:300])

    for name in ("fla", "tilelang", "transformers.integrations.hub_kernels", "kernels"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.INFO)
        lg.addHandler(Keep())
    return kept


def dist_versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for dist in ("fla-core", "causal-conv1d", "tilelang", "apache-tvm-ffi", "kernels", "triton", "huggingface_hub"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--out")
    ap.add_argument("--save-only", action="store_true")
    ap.add_argument("--tokens", type=int, default=256)
    args = ap.parse_args()

    fla_logs = keep_logs()
    import torch
    import transformers

    result: dict[str, Any] = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                           "python": sys.version.split()[0]},
                              "env": {k: v for k, v in os.environ.items()
                                      if k.startswith(("FLA_", "USE_HUB", "HF_HUB_OFFLINE", "CUDA_HOME", "LOCAL_K"))}}
    result["versions"].update(dist_versions())
    import shutil

    result["nvcc"] = shutil.which("nvcc")
    if not os.path.exists(os.path.join(args.model_dir, "config.json")) or args.save_only:
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(tiny_config())
        model.save_pretrained(args.model_dir)
        if args.save_only:
            print(json.dumps({"saved": args.model_dir}))
            return 0
    load: dict[str, Any] = {"ok": False, "error": None}
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.bfloat16)
        load["ok"] = True
    except Exception as exc:  # noqa: BLE001 - a model that fails to load is a result, recorded
        load["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    result["load"] = load
    if load["ok"]:
        model = model.to("cuda")
        ids = torch.randint(0, 128, (1, args.tokens), device="cuda")

        def train() -> None:
            model.train()
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()

        def infer() -> None:
            model.eval()
            with torch.no_grad():
                out = model(input_ids=ids, use_cache=True)
                nxt = out.logits[:, -1:].argmax(-1)
                model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)

        result["train"] = profiled(train)
        result["infer"] = profiled(infer)
        result["path"] = {"train": path_of(result["train"]), "infer": path_of(result["infer"])}
    else:
        result["path"] = {"train": "crash", "infer": "crash"}
    result["fla_logs"] = fla_logs[-20:]
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(json.dumps({"path": result["path"], "load": load}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
