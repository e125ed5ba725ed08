"""`verify --packing [MODE]`: the measurement (verify/packing.py) beside doctor's decision, and the verdict.

The verdict is the verdict doctor gives for the same mode (`doctor --packing MODE`): exit 0 when MODE keeps the
sequences apart here, 4 when they mix or the step raises. Without MODE it is the verdict of the mode doctor
recommends (flash: DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)). A mode
where the measurement and doctor's decision differ is named (the measurement decides the exit code).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from kernelcheck.packing.decide import RECOMMENDED
from kernelcheck.verify.packing import MODES, PackingResult

log = logging.getLogger(__name__)


def verdict(results: list[PackingResult], declared: str | None) -> tuple[str, int]:
    """(ready | broken, exit code) for the declared mode, or the recommended one."""
    want = declared or RECOMMENDED
    if want == "none":
        return "ready", 0
    got = next(r for r in results if r.mode == want)
    return ("ready", 0) if got.outcome == "correct" else ("broken", 4)


def doctor_outcomes(module: str, functions: tuple[str, ...]) -> dict[str, str]:
    """doctor's packing decision per mode for the functions transformers binds here (packing/decide.py)."""
    from kernelcheck.integrations import transformers as bindings_mod
    from kernelcheck.packing.decide import section

    result = bindings_mod.bind(module, functions, exact=True)
    statuses = {f: ("fast" if b.bound == "package" else "fallback") for f, b in result.bindings.items()}
    sec = section(statuses, None)
    return {m["mode"]: m["outcome"] for m in (sec or {}).get("modes", [])}


def _length_line(r: Any) -> str:
    head = f"    {r.name:<5} {r.lengths[0]:>3} + {r.lengths[1]:<3}"
    if r.outcome == "raises":
        return f"{head} raises {(r.error or '')[:72]}"
    layers = ", ".join(f"{k} {v:.2g}" for k, v in r.per_layer_type.items())
    return f"{head} {r.outcome:<7} logits {r.max_logit_diff:.2g} ({layers})"


def render_text(results: list[PackingResult], device: str, cached: float | None = None) -> str:
    lines = [f"kernelcheck verify --packing: tiny Qwen3.5 (GDN + conv + attention), fp32, {device}; two sequences",
             "packed by DataCollatorWithFlattening vs alone, training forward (use_cache=False); max |diff|"]
    for r in results:
        doc = "" if r.doctor is None else f"doctor: {r.doctor}" + ("" if r.doctor == r.outcome else " (DISAGREES)")
        lines.append(f"  {r.mode:<13} {r.outcome:<8} {doc}")
        lines.append(f"    batch: {r.collator}")
        lines.extend(_length_line(x) for x in r.lengths)
    if cached is not None:
        lines.append(f"  the flash batch with a cache (use_cache on, no gradient checkpointing), attention layers only:"
                     f"\n    logits {cached:.2g} (the attention finds the sequences only without a cache)")
    return "\n".join(lines)


def _tail(results: list[PackingResult], declared: str | None, code: int) -> list[str]:
    want = declared or RECOMMENDED
    out = [f"mode {r.mode}: measured {r.outcome}, doctor decides {r.doctor}: the measurement decides"
           for r in results if r.doctor is not None and r.doctor != r.outcome]
    if code == 0:
        out.append(f"verdict: READY: packing mode {want} keeps the sequences apart here")
    else:
        out.append(f"verdict: BROKEN: packing mode {want} does not keep the sequences apart here (exit 4)")
        out.append("  fix: pad instead, or install fla-core and causal-conv1d and use DataCollatorWithFlattening("
                   "\n  return_flash_attn_kwargs=True, return_seq_idx=True), forward without a cache")
    return out


def command(query: str, as_json: bool, declared: str | None = None) -> tuple[str, int]:
    """`verify --model M --packing [MODE]`: (output, exit code)."""
    import torch

    from kernelcheck import SCHEMA
    from kernelcheck.core import models as models_mod
    from kernelcheck.core.errors import BadInput
    from kernelcheck.verify import packing as packing_mod

    model = models_mod.resolve(query)
    if "chunk_gated_delta_rule" not in model.spec.functions:
        raise BadInput(f"verify --packing measures the Gated DeltaNet + short conv path (Qwen3.5/3.6/3.8, "
                       f"Qwen3-Next); {query} ({model.model_type}) does not use it. Use `kernelcheck doctor "
                       f"--model {query} --packing MODE` for the decision from source.")
    if declared is not None and declared not in (*MODES, "none"):
        raise BadInput(f"--packing {declared!r} is not a packing mode. Use one of: none, {', '.join(MODES)}.")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = packing_mod.measure_all(device)
    decided = doctor_outcomes("qwen3_5", model.spec.functions)  # the module of the measured tiny model
    for r in results:
        r.doctor = decided.get(r.mode)
    cached = packing_mod.cached_forward(device)
    word, code = verdict(results, declared)
    if as_json:
        return json.dumps({"schema": SCHEMA, "command": "verify", "verdict": word, "exit_code": code,
                           "model": model.to_json(), "device": device, "declared": declared,
                           "judged_mode": declared or RECOMMENDED, "packing": [r.as_dict() for r in results],
                           "cached_forward_max_logit_diff": round(cached, 6)}, indent=2), code
    return "\n".join([render_text(results, device, cached), *_tail(results, declared, code)]), code
