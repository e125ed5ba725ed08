"""GPU truth for transformers 5.25's Hub-by-default load: what `from_pretrained` plus one train
step really do, to compare with `kernelcheck doctor --model FOLDER --mode train` on the same machine.

Run on the H200 (torch 2.11+cu130, fla-core 0.6.0, causal-conv1d 1.7.0, transformers 5.25.0 + kernels 0.19.1,
HF_HUB_OFFLINE=1, an empty HF cache), from the repository root, once as is and once with USE_HUB_KERNELS=0:

    export HF_HUB_OFFLINE=1 HF_HUB_CACHE=$(mktemp -d) PYTHONPATH=$PWD
    python tests/programs/gpu_hub_default_truth.py /tmp/tiny-qwen35 > truth_default.json
    USE_HUB_KERNELS=0 python tests/programs/gpu_hub_default_truth.py /tmp/tiny-qwen35 > truth_off.json
    kernelcheck doctor --model /tmp/tiny-qwen35 --mode train --json > doctor_default.json
    USE_HUB_KERNELS=0 kernelcheck doctor --model /tmp/tiny-qwen35 --mode train --json > doctor_off.json

Builds the smallest Qwen3.5 text model from its config (docs/facts.md section 1: one Gated DeltaNet layer and one
full-attention layer), saves it to FOLDER (save_pretrained, random weights), loads it back with
`AutoModelForCausalLM.from_pretrained(FOLDER)` exactly as a job does (no use_kernels argument: 5.25's default), moves
it to the device and runs one train step (forward + backward + an SGD step) under the profiler. Prints one JSON
object on stdout:
  loaded (bool), error (the load's or the step's exception, first line, or null), step_ok (bool),
  implementations: {slot: [callables that ran]} (recorded on the modeling module's fast-function slots),
  hub: per Hub-named layer/function whether kernelize replaced its forward (kernelcheck.integrations.kernels_prefetch
  .applied_kernels), kernels: the GPU kernel names of the step that belong to fla / causal-conv1d / a Hub build,
  versions and the environment switches. Expected: with an empty cache the default run has loaded false and the
error "Version 3 of 'kernels-community/fla' is not available in the local cache ..." (doctor: BROKEN, exit 4); with
USE_HUB_KERNELS=0 loaded true, step_ok true, fla and causal-conv1d kernels in the step (doctor: READY, exit 0, when
the fla#640 backward precondition is met).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

FAST_MARKS = ("chunk_", "fused_recurrent", "causal_conv1d", "l2norm", "recompute_w_u", "solve_tril", "kkt",
              "gated_delta", "rms_norm", "layer_norm")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:400] if text else ''}"


def build(folder: Path) -> None:
    """The tiny Qwen3.5 saved to `folder` (reused when already there)."""
    if (folder / "config.json").is_file():
        return
    import torch
    from transformers import AutoModelForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(0)
    cfg = Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=2,
                            linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                            layer_types=["linear_attention", "full_attention"])
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)


def _recorder(model: Any) -> Any:
    """groundtruth's recorder on the modeling module's slots (which callable each fast-function slot ran)."""
    try:
        from tests.groundtruth import Recorder, _slot_names

        module = sys.modules[type(model).__module__]
        rec = Recorder(module, _slot_names(module.__name__))
        rec.patch_module()
        rec.patch_model(model)
        return rec
    except Exception as exc:  # noqa: BLE001 - the step is the truth; the recording is extra evidence
        print(f"recorder unavailable: {_first_line(exc)}", file=sys.stderr)
        return None


def step(model: Any, device: str, dtype: Any) -> tuple[bool, str | None, list[str]]:
    """One train step under the profiler: (ok, error, fast-path kernel names seen)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    model.to(device=device, dtype=dtype).train()
    ids = torch.randint(0, model.config.vocab_size, (1, 96), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    names: set[str] = set()
    try:
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profile(activities=acts) as prof:
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            if device == "cuda":
                torch.cuda.synchronize()
        ok = bool(torch.isfinite(out.loss).item())
        err = None if ok else "loss is not finite"
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA and any(m in ev.name for m in FAST_MARKS):
                names.add(ev.name[:120])
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        return False, _first_line(exc), sorted(names)
    return ok, err, sorted(names)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    args = parser.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    build(args.folder)
    result: dict[str, Any] = {
        "loaded": False, "error": None, "step_ok": False, "implementations": {}, "hub": [], "kernels": [],
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "env": {k: os.environ.get(k) for k in ("USE_HUB_KERNELS", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "KERNELS_CACHE",
                                               "LOCAL_KERNELS")},
        "folder": str(args.folder), "device": args.device, "dtype": args.dtype}
    for dist in ("kernels", "fla-core", "causal-conv1d", "triton", "tilelang"):
        try:
            from importlib.metadata import version

            result["versions"][dist] = version(dist)
        except Exception:  # noqa: BLE001 - absent
            result["versions"][dist] = None
    try:
        model = AutoModelForCausalLM.from_pretrained(args.folder)  # the job's load: 5.25's use_kernels default
        result["loaded"] = True
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        result["error"] = _first_line(exc)
        print(json.dumps(result))
        return
    try:
        from kernelcheck.integrations.kernels_prefetch import applied_kernels

        result["hub"] = applied_kernels(model)
    except Exception as exc:  # noqa: BLE001
        result["hub"] = [{"error": _first_line(exc)}]
    rec = _recorder(model)
    if rec is not None:
        rec.step = "train"
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    result["step_ok"], result["error"], result["kernels"] = step(model, args.device, dtype)
    if rec is not None:
        for c in rec.calls:
            result["implementations"].setdefault(c["slot"], [])
            if c["callable"] not in result["implementations"][c["slot"]]:
                result["implementations"][c["slot"]].append(c["callable"])
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
