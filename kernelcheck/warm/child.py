"""warm's child process: the job's fast path, run in a fresh interpreter whose environment points every JIT at the
cache folder (the parent set TRITON_CACHE_DIR, TILELANG_CACHE_DIR, ... for this process only).

    python -m kernelcheck.warm.child SPEC_JSON

SPEC: {"model", "mode", "shapes", "tokens", "compile", "packing", "repeat"}. For each shape it builds the model's real
layers (verify/layers.py: the same classes, config and shapes verify builds) and runs the steps verify runs (train:
forward with labels, loss, backward, then a prefill and a cached decode; infer: the prefill and the decode), once
cold and, with `repeat`, once more in the same process (the warm time); with `compile`, the training step under
torch.compile too (Inductor); with `packing`, verify --packing's measurement. The time inside each JIT's compile
entry point is counted (integrations/jit_caches.py `install_timers`). Its answer, one JSON line on stdout:
{"keys", "device", "shapes": {shape: {"cold_s", "warm_s", "tokens"}}, "compile", "packing", "timers", "error"}.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from functools import partial
from types import SimpleNamespace
from typing import Any

from kernelcheck.integrations import jit_caches


def _steps(built: Any, mode: str, tokens: int) -> Any:
    from kernelcheck.verify.steps import Steps

    # verify's own steps, without its instrument: nothing is recorded, the same modeling code runs
    return Steps(built, SimpleNamespace(step="", mark_backward=False), mode, tokens)  # type: ignore[arg-type]


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return round(time.perf_counter() - t0, 3)


def _compiled_step(built: Any, tokens: int) -> dict[str, Any]:
    """The training step (forward with labels, backward) under torch.compile: Inductor's cold, then warm time."""
    import torch

    model = built.model
    model.train()
    fn = torch.compile(model)
    ids = torch.randint(0, int(model.config.vocab_size), (1, tokens), device=built.device)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        fn(input_ids=ids, labels=ids, use_cache=False).loss.backward()  # type: ignore[no-untyped-call]  # torch.compile: unannotated
        if built.device.startswith("cuda"):
            torch.cuda.synchronize()

    try:
        return {"cold_s": _timed(step), "warm_s": _timed(step)}
    except Exception as exc:  # noqa: BLE001 - a compile that fails is said; the eager steps were warmed
        return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc) else ''}"}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from kernelcheck.core import entry, models
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import layers
    from kernelcheck.verify.run import attn_impl
    from kernelcheck.verify.steps import run_all

    m = entry.matrix()
    timers = jit_caches.install_timers(("triton", "tilelang", "flash_qla"))
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda:0", "bfloat16") if cuda else ("cpu", "float32")
    out: dict[str, Any] = {"device": device, "gpu": torch.cuda.get_device_name(0) if cuda else None, "shapes": {},
                           "hooked": timers.hooked, "missing": timers.missing}
    model = transformers_models.resolve(spec["model"], m=m)
    attn = attn_impl(model, models.needs(model, None, m=m))
    data = layers.verify_data(m=m)
    for shape in spec["shapes"]:
        tokens = int(spec.get("tokens") or data["tokens"][shape])
        built = layers.build(model, shape, device, dtype, attn, m=m)
        steps = _steps(built, spec["mode"], tokens)
        # as verify runs it: at the tiny shape one working config per autotuned kernel; the job's shapes autotune
        with jit_caches.first_config_only(shape == "tiny") as trimmed:
            row: dict[str, Any] = {"tokens": tokens, "steps": list(steps.names), "one_config": trimmed,
                                   "cold_s": _timed(partial(run_all, steps))}
            if spec.get("repeat", True):
                row["warm_s"] = _timed(partial(run_all, steps))
        if spec.get("compile"):
            row["compile"] = _compiled_step(built, tokens)
        out["shapes"][shape] = row
        del steps, built
        if cuda:
            torch.cuda.empty_cache()
    if spec.get("packing"):
        from kernelcheck.verify import packing_report

        t0 = time.perf_counter()
        with jit_caches.first_config_only():  # as verify --packing runs it
            packing_report.measure(spec["model"], None, m=m)
        out["packing_s"] = round(time.perf_counter() - t0, 3)
    out["timers"] = timers.snapshot()
    out["keys"] = jit_caches.read_keys()
    return out


def main(argv: list[str]) -> int:
    try:
        out = run(json.loads(argv[0]))
    except Exception as exc:  # noqa: BLE001 - the parent reports it (the model does not build, a kernel raises)
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
        out = {"error": f"{type(exc).__name__}: {str(exc).strip()[:600]}{where}"}
    print(json.dumps(out, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
