"""Does a job's `from_pretrained` raise under transformers 5.25 + kernels 0.19.1 with HF_HUB_OFFLINE=1 and an empty
Hub cache? The proof for doctor's CUDA prediction (`hub-not-listable`: "kernels raises instead of falling back, so
the load fails"), for a model with no fast-kernel layer (llama) and a hybrid (qwen3_5).

    python benchmarks/hub_offline_load.py --model-type llama --folder /tmp/tiny-llama --save-only
    HF_HUB_OFFLINE=1 HF_HOME=$(mktemp -d) python benchmarks/hub_offline_load.py --model-type llama \
        --folder /tmp/tiny-llama --load plain --device cuda

Building: the model type tiny, from its config (kernelcheck's verify builder, random weights, never a download),
saved with save_pretrained. Loading, as a job does, one way per process:
- plain: `AutoModelForCausalLM.from_pretrained(FOLDER)` (no device_map: the model is on the CPU while transformers
  5.25 kernelizes it), then `.to(DEVICE)`;
- device_map: `from_pretrained(FOLDER, device_map=DEVICE)` (kernelized for DEVICE).
Then one train step (forward + backward) on DEVICE. Prints one JSON object: model_type, load, device, loaded,
load_error (first line of the exception, or null), step_ok, step_error, hub (which Hub-named layers kernelize
replaced), versions and the Hub switches. Runs on a GPU machine, on a CUDA torch build without a GPU and on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:400] if text else ''}"


def save(model_type: str, folder: Path) -> str:
    """The tiny model of `model_type` saved to `folder`; its class name."""
    from kernelcheck.core import matrix
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import layers

    m = matrix.load()
    built = layers.build(transformers_models.resolve(model_type, m=m), "tiny", "cpu", "float32", None, m=m)
    built.model.save_pretrained(folder)
    return built.model_class


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for dist in ("torch", "transformers", "kernels", "huggingface_hub", "fla-core", "causal-conv1d", "triton"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def load_and_step(folder: Path, load: str, device: str) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    out: dict[str, Any] = {"loaded": False, "load_error": None, "step_ok": False, "step_error": None, "hub": []}
    try:
        if load == "device_map":
            model = AutoModelForCausalLM.from_pretrained(folder, device_map=device)
        else:
            model = AutoModelForCausalLM.from_pretrained(folder)
        out["loaded"] = True
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        out["load_error"] = _first_line(exc)
        return out
    try:
        from kernelcheck.integrations.kernels_prefetch import applied_kernels

        out["hub"] = applied_kernels(model)
    except Exception as exc:  # noqa: BLE001 - extra evidence only
        out["hub"] = [{"error": _first_line(exc)}]
    try:
        model.to(device).train()
        ids = torch.randint(0, model.config.vocab_size, (1, 32), device=device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        out["step_ok"] = bool(torch.isfinite(loss).item())
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        out["step_error"] = _first_line(exc)
    return out


def replay(model_type: str, device: str, capability: str, mode: str) -> dict[str, Any]:
    """The job's load replayed with the installed transformers + kernels code, on any machine: the model is built
    on the meta device from its config (no weights, no download), `model.eval()` then `set_use_kernels(True,
    device_map={"": DEVICE})` as `from_pretrained` does, then `model.train()` for a train job. The device's
    compute capability is answered (`torch.cuda.get_device_capability` -> CAPABILITY) where no GPU is visible.
    kernels' own `kernelize` picks every repository; each `repo.load()` runs for real (offline with an empty cache
    it raises kernels' own ValueError), is recorded, and is then turned into FileNotFoundError so kernelize falls
    back and goes on to the next layer: one run lists every repository the load resolves, and what each raised;
    `hub` says which Hub-named layers kernelize bound in the end (applied_kernels)."""
    import torch

    major, minor = (int(x) for x in capability.split("."))
    if not torch.cuda.is_available():
        torch.cuda.get_device_capability = lambda device=None: (major, minor)  # type: ignore[assignment]
    from kernels._internals.layer import layer as kernels_layer  # the installed kernels' resolution
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    phase = ["load"]
    seen: list[dict[str, Any]] = []
    original = kernels_layer._get_layer_memoize

    def recorded(repo: Any, module_class: Any) -> Any:
        entry = {"phase": phase[0], "repo_id": getattr(repo, "_repo_id", None) or getattr(repo, "repo_id", None),
                 "version": getattr(repo, "_version", None) or getattr(repo, "version", None),
                 "repr": repr(repo), "layer": getattr(module_class, "kernel_layer_name", None), "error": None}
        try:
            return original(repo, module_class)
        except Exception as exc:
            entry["error"] = _first_line(exc)
            raise FileNotFoundError(entry["error"]) from exc
        finally:
            key = (entry["phase"], entry["repo_id"], entry["version"], entry["layer"])
            if all((e["phase"], e["repo_id"], e["version"], e["layer"]) != key for e in seen):
                seen.append(entry)

    kernels_layer._get_layer_memoize = recorded
    cfg = AutoConfig.for_model(model_type)
    with torch.device("meta"):
        try:
            model = AutoModelForCausalLM.from_config(cfg)
        except ValueError:  # a vision or audio tower: AutoModel only
            model = AutoModel.from_config(cfg)
    model.eval()
    model.set_use_kernels(True, device_map={"": device})
    if mode == "train":
        phase[0] = "train"
        model.train()
    try:
        from kernelcheck.integrations.kernels_prefetch import applied_kernels

        bound: list[dict[str, Any]] = applied_kernels(model)
    except Exception as exc:  # noqa: BLE001 - extra evidence only
        bound = [{"error": _first_line(exc)}]
    return {"model_type": model_type, "class": type(model).__name__, "device": device, "capability": capability,
            "mode": mode, "resolved": seen, "hub": bound,
            "first_error": next((e["error"] for e in seen if e["error"]), None)}


def predicted(model_type: str, device: str, capability: str, mode: str) -> list[dict[str, Any]]:
    """doctor's list for the same load: kernelcheck.hub.prediction.load_repositories."""
    from kernelcheck.core import matrix
    from kernelcheck.hub.prediction import load_repositories

    major, minor = (int(x) for x in capability.split("."))
    return [{"name": r.name, "phase": r.phase, "kernels_mode": r.kernels_mode, "repo": r.repo.spec,
             "repo_id": r.repo.repo_id, "version": r.repo.version}
            for r in load_repositories(model_type, mode=mode, device=device, capability=major * 10 + minor,
                                       m=matrix.load())]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-type", required=True)
    ap.add_argument("--folder", type=Path)
    ap.add_argument("--save-only", action="store_true")
    ap.add_argument("--load", choices=("plain", "device_map"), default="plain")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--replay", action="store_true", help="replay the load's kernelize (meta model, any machine)")
    ap.add_argument("--capability", default="9.0", help="with --replay: the compute capability to answer")
    ap.add_argument("--mode", choices=("train", "infer"), default="train", help="with --replay: the job's mode")
    a = ap.parse_args()
    if a.replay:
        import logging

        logging.disable(logging.WARNING)
        out = replay(a.model_type, a.device, a.capability, a.mode)
        out["predicted"] = predicted(a.model_type, a.device, a.capability, a.mode)
        out["versions"] = versions()
        print(json.dumps(out, default=str))
        return 0
    if a.folder is None:
        ap.error("--folder is required without --replay")
    if a.save_only or not (a.folder / "config.json").is_file():
        cls = save(a.model_type, a.folder)
        if a.save_only:
            print(json.dumps({"model_type": a.model_type, "saved": str(a.folder), "class": cls}))
            return 0
    import logging

    logging.disable(logging.WARNING)
    result = {"model_type": a.model_type, "load": a.load, "device": a.device, "folder": str(a.folder),
              **load_and_step(a.folder, a.load, a.device), "versions": versions(),
              "env": {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "USE_HUB_KERNELS",
                                                     "LOCAL_KERNELS")}}
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
