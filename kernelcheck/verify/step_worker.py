"""One path of `verify --step`, in its own process: `python -m kernelcheck.verify.step_worker IN.json OUT.json`.

Bindings are fixed when the modeling module is imported, so the bound path and the forced torch
reference each get a fresh interpreter. The reference is forced the way `verify` forces it: the
instrument calls each function's torch reference (`torch_function`, what transformers runs when the
package is absent) instead of the bound implementation.

The worker builds the step model (step_model.py), runs whole training steps (forward, loss, backward,
AdamW step, zero_grad): the first one alone (its time is the cold cost: Triton compiles and autotunes
there), `warmup` more, `timed` synchronised ones (median = the step time), then `profiled` steps under
torch.profiler with one ProfilerStep#N each, exports the trace (gzip) and analyses it with the same
code as `kernelcheck trace`. Its stdout/stderr (profiler and transformers noise) go to a log the
parent shows with --verbose.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


class _Trainer:
    def __init__(self, lm: Any, ids: Any, device: str, checkpointing: bool):
        import torch

        self.torch, self.lm, self.ids, self.device = torch, lm, ids, device
        fused = device.startswith("cuda")
        self.opt = torch.optim.AdamW(lm.parameters(), lr=1e-5, fused=fused)
        self.fused = fused
        lm.train()

    def step(self) -> float:
        torch, rf = self.torch, self.torch.profiler.record_function
        with rf("kernelcheck::phase::forward"):
            out = self.lm(input_ids=self.ids, labels=self.ids, use_cache=False)
            loss = out.loss
        with rf("kernelcheck::phase::backward"):
            loss.backward()
        with rf("kernelcheck::phase::optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        del out
        return float(loss.detach()) if torch.isfinite(loss).item() else float("nan")


def _wait_for(gate: str | None) -> None:
    """Block until the parent creates `gate` (step.py's overlap); end quietly when the parent is gone."""
    if not gate:
        return
    parent = os.getppid()
    while not os.path.exists(gate):
        if os.getppid() != parent:
            raise SystemExit(1)
        time.sleep(0.02)


def run(args: dict[str, Any]) -> dict[str, Any]:
    from kernelcheck.core import signals

    with signals.held(second_interrupts=True):  # torch's C code clears a KeyboardInterrupt inside its numpy import
        import torch

    from kernelcheck.core import entry
    from kernelcheck.integrations import transformers, transformers_models
    from kernelcheck.trace import analysis, phases  # noqa: F401 - imported here: counted in import_s
    from kernelcheck.verify import step_model
    from kernelcheck.verify.instrument import Instrument

    t0, started_at = time.perf_counter(), time.time()
    m = entry.matrix()  # this child's one matrix, passed down
    model = transformers_models.resolve(args["query"], m=m)
    result = transformers.bind(model.spec.module, model.spec.functions, exact=True, m=m)
    import_s = time.perf_counter() - t0
    _wait_for(args.get("start_gate"))
    gate_at = time.time()
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    cfg, shape = step_model.step_config(model, args["shape"], args.get("layers"), m=m)
    lm = step_model.build(cfg, device, dtype, bool(args["checkpointing"]), args.get("attn"))
    build_s = time.perf_counter() - t0 - import_s
    fallbacks = {f: m.functions[f].torch_fallback for f in result.bindings if f in m.functions}
    inst = Instrument(result.module, result.bindings, lm, result.regime, fallbacks)
    if args["path"] == "reference":
        inst.forced = {f for f, h in inst.hooks.items() if h.torch_function is not None}
    ranges = step_model.LayerRanges(lm, shape.built_types)
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, int(cfg.vocab_size), (1, int(args["tokens"])), generator=g).to(device)
    trainer = _Trainer(lm, ids, device, bool(args["checkpointing"]))
    out: dict[str, Any] = {"path": args["path"], "device": device, "dtype": dtype,
                           "layers": list(shape.built_types), "full_layer_types": shape.full_types,
                           "full_layers": shape.full_layers, "period": shape.period, "tokens": int(args["tokens"]),
                           "parameters": sum(p.numel() for p in lm.parameters()),
                           "checkpointing": bool(args["checkpointing"]), "fused_adamw": trainer.fused,
                           "class": type(lm).__name__}
    per_type, outside = step_model.parameters_by_type(lm, shape.built_types)
    out["parameters_per_layer"] = per_type
    out["parameters_outside_layers"] = outside
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    with inst:
        t1 = time.perf_counter()
        out["first_loss"] = trainer.step()
        _sync(device)
        first_s = time.perf_counter() - t1
        _wait_for(args.get("timed_gate"))
        for _ in range(int(args["warmup"])):
            trainer.step()
        _sync(device)
        times = []
        for _ in range(int(args["timed"])):
            t = time.perf_counter()
            trainer.step()
            _sync(device)
            times.append(time.perf_counter() - t)
        ctl = args.get("controls")
        if ctl:  # the ratio's controls, on this path's own timing (verify/timing_controls.py)
            from kernelcheck.verify import timing_controls

            out["controls"] = timing_controls.measure(
                trainer.step, lambda: _sync(device), lm, sorted(times)[len(times) // 2] * 1000,
                float(ctl["fraction"]), int(ctl["repeats"])).to_json()
        inst.reset()
        trace_path = Path(args["trace"])
        _profiled(trainer, device, int(args["profiled"]), trace_path)
        out["implementations"] = sorted({f"{r.function}: {r.implementation}" for r in inst.records})
        out["fast_calls"] = sum(1 for r in inst.records if r.fast and not r.forced)
        out["calls"] = len(inst.records)
    ranges.remove()
    times.sort()
    step_s = times[len(times) // 2]
    out.update({"step_ms": round(step_s * 1000, 3), "tokens_per_s": round(int(args["tokens"]) / step_s, 1),
                "timed_steps_ms": [round(t * 1000, 3) for t in times]})
    out["peak_memory_bytes"], out["peak_memory_kind"] = _peak(device)
    out.update(analysed(trace_path, m=m))
    out["cost"] = {"import_s": round(import_s, 3), "build_s": round(build_s, 3), "first_step_s": round(first_s, 3),
                   "total_s": round(time.perf_counter() - t0, 3),
                   # wall clock (seconds since the epoch): step.py's overlap keeps the GPU work sequential
                   "started_at": started_at, "gate_passed_at": gate_at, "finished_at": time.time()}
    return out


def _profiled(trainer: _Trainer, device: str, n: int, path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    plain = path.with_suffix("")  # x.json.gz -> x.json
    # one ProfilerStep#N range per step needs a schedule; the trace is exported when the active steps end
    sched = schedule(wait=0, warmup=0, active=n, repeat=1)
    with profile(activities=acts, record_shapes=False, schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(plain))) as prof:
        for _ in range(n):
            trainer.step()
            _sync(device)
            prof.step()
    with open(plain, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()


def analysed(trace_path: Path, *, m: Any) -> dict[str, Any]:
    """The worker's reading of its own profiled trace, with the code of `kernelcheck trace`: its numbers and the
    step's phase breakdown (a trace that does not parse raises: the worker's result is then an error)."""
    from kernelcheck.trace import analysis, phases

    return {"trace": _trace_numbers(analysis.analyze_file(trace_path, m=m)),
            "breakdown": phases.collect(_events(trace_path))}


def _events(path: Path) -> list[dict[str, Any]]:
    from kernelcheck.trace.reader import TraceReader

    return list(TraceReader(path).events())


def _peak(device: str) -> tuple[int, str]:
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.max_memory_allocated()), "cuda max_memory_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss) * (1 if sys.platform == "darwin" else 1024), "process peak RSS (CPU)"


def _trace_numbers(an: Any) -> dict[str, Any]:
    steps = [s.to_json() for s in an.steps]
    n = max(1, len(steps))

    def mean(key: str) -> float:
        return sum(float(s[key]) for s in steps) / n if steps else float(an.summary.to_json()[key])

    busy = [s["gpu_busy_fraction"] for s in steps if s["gpu_busy_fraction"] is not None]
    return {"profiled_steps": len(steps), "kernels_per_step": round(mean("kernels")),
            "cpu_ops_per_step": round(mean("cpu_ops")), "profiled_step_ms": round(mean("wall_us") / 1000, 3),
            "gpu_busy_fraction": round(sum(busy) / len(busy), 4) if busy else None,
            "launch_bound_steps": list(an.launch_bound_steps), "verdict": an.diagnosis,
            "fallback_signatures": [m.reported(with_steps=False).to_json() for m in an.fallbacks],
            "fast_packages": list(an.fast_packages), "cpu_only": an.cpu_only,
            "launch_delay_ms": {k: round(float(v) / 1000, 3) for k, v in an.summary.launch_delay_us.items()
                                if k != "count"}}


_OOM_WORDS = ("out of memory", "can't allocate memory", "not enough memory", "cannot allocate memory")


def out_of_memory(exc: BaseException) -> bool:
    """MemoryError, torch's OutOfMemoryError (CUDA), or the CPU allocator's RuntimeError: a limit of this
    machine for the asked size, not a kernel failure."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and any(w in str(exc).lower() for w in _OOM_WORDS)


def main(argv: list[str]) -> int:
    args = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from kernelcheck.core import signals

    signals.route()  # SIGINT even if the shell started the check with it ignored, SIGTERM as Interrupted
    try:
        out = run(args)
    except KeyboardInterrupt as exc:  # 130/143: the parent stops the whole check (step.py), no result here
        from kernelcheck.core.errors import Interrupted

        return Interrupted.of(exc).exit_code
    except Exception as exc:  # noqa: BLE001 - the parent reports it as what this path did
        import traceback

        traceback.print_exc()
        out = {"path": args.get("path"), "error": f"{type(exc).__name__}: {str(exc).strip()[:600]}",
               "out_of_memory": out_of_memory(exc)}
    Path(argv[1]).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
