"""verify: run the model's real layers on this machine under the profiler and prove which path ran.

Static checks can be wrong (a kernel that imports but fails at call time, a refusal such as fla#640,
a Triton compile error, wrong results). This module builds the model's own transformers layers from
its config with random weights (layers.py), runs a training step (train mode) and a prefill plus one
cached decode step on the local device while instrument.py records which implementation each fast
function really executed, attributes the profiler's ops and kernels to each call (evidence.py),
compares the fast path with the torch reference on the same weights and inputs, and turns it into
per-function evidence and a status: fast / fallback / broken / unsupported.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kernelcheck.core import decide, matrix, models
from kernelcheck.core.errors import BackwardFailed, BadInput
from kernelcheck.core.status import Finding, Mode, Severity, Status
from kernelcheck.integrations import transformers, transformers_models
from kernelcheck.report.live import CapturedLine, NotRunLine
from kernelcheck.report.live_details import LiveDetails, LiveModel, Timing, TritonCacheState, comparison
from kernelcheck.report.model import LiveSection, Report
from kernelcheck.report.progress import working
from kernelcheck.verify import layers
from kernelcheck.verify import noise as noise_mod
from kernelcheck.verify import steps as steps_mod
from kernelcheck.verify.bench import run_benchmark
from kernelcheck.verify.compare import compare_results, direct_compare, isolate
from kernelcheck.verify.instrument import CallRecord, Instrument
from kernelcheck.verify.statuses import function_evidence, live_items, model_findings, observation, profiled_step
from kernelcheck.verify.steps import (
    SHAPES,
    Failure,
    LiveRun,
    Steps,
    cache_entries,
    first_line,
    run_all,
    run_profiled,
    say,
    triton_cache_dir,
)

__all__ = ["SHAPES", "LiveRun", "cache_entries", "function_evidence", "merge_into", "run_live", "triton_cache_dir",
           "verify"]


def _blame(inst: Instrument, exc: BaseException) -> tuple[CallRecord | None, BaseException]:
    if isinstance(exc, BackwardFailed):
        return inst.blame_backward(exc.original), exc.original
    for rec in reversed(inst.records):
        if rec.error:
            return rec, exc
    return None, exc


def _first_pass(steps: Steps, inst: Instrument, run: LiveRun) -> dict[str, dict[str, Any]] | None:
    """Run every step once, unprofiled (compiles and autotunes Triton kernels). A function that raises is
    recorded as broken and forced onto its torch reference, and the steps run again, so the other
    functions still get tested."""
    for _ in range(len(inst.hooks) + 1):
        inst.reset()
        inst.capture = {}
        inst.capture_steps = {"prefill", "decode"}
        inst.check_values = True
        try:
            results = run_all(steps)
            run.nonfinite = {r.function for r in inst.records if r.nonfinite and not r.forced}
            return results
        except Exception as exc:  # noqa: BLE001 - a failing kernel is what verify is looking for
            rec, original = _blame(inst, exc)
            msg = f"{type(original).__name__}: {first_line(original)}"
            if rec is None or rec.function in inst.forced:
                run.step_error = f"step '{steps.inst.step}' failed: {msg}"
                run.step_error_fast = any(r.fast for r in inst.records)
                return None
            run.failures[rec.function] = Failure(rec.function, rec.error_phase or "forward", rec.step, msg,
                                                 rec.implementation)
            say(f"{rec.function} raised in {rec.error_phase or 'forward'} ({msg[:160]}); marking it broken and "
                 "re-running with its torch reference so the other functions are still checked")
            inst.forced.add(rec.function)
        finally:
            inst.capture_steps = set()
            inst.check_values = False
    return None




# -- orchestration --------------------------------------------------------------------------------
def _device() -> tuple[str, str]:
    import torch

    if torch.cuda.is_available():
        return "cuda:0", "bfloat16"
    return "cpu", "float32"


def _gpu_device_files() -> bool:
    """Whether this machine has any GPU device file (NVIDIA /dev/nvidia0.., ROCm /dev/kfd, WSL /dev/dxg): without
    one, torch.cuda cannot be available, and no torch import (seconds) is needed to say so."""
    dev = Path("/dev")
    return not dev.is_dir() or any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists() or (dev / "dxg").exists()


def _full_needs_cuda(shape: str, device: str) -> None:
    """--shape full without a CUDA GPU is bad usage: said before doctor, the model and its layers are imported."""
    if shape == "full" and not device.startswith("cuda"):
        raise BadInput("--shape full builds one real-size layer of each type (the 27B GDN layer is hidden 5120 with "
                       "48 value heads) and needs a CUDA GPU: on this machine there is none, every function runs "
                       "its torch reference anyway, and the full layer would take minutes in fp32 on the CPU. Use "
                       "--shape tiny here (the same code path), or run --shape full on the GPU machine.")


def attn_impl(model: models.ResolvedModel, needs: models.Needs) -> str | None:
    """The config's own attn_implementation when it names one that can load here; None: the class default."""
    asked: str | None = (model.text_config.get("_attn_implementation") or model.config.get("_attn_implementation")
             or model.config.get("attn_implementation"))
    if not asked:
        return None
    if not needs.attention_package:
        return asked
    import importlib.util

    return asked if importlib.util.find_spec(needs.attention_package) else None


def _profile_steps(steps: Steps, inst: Instrument, run: LiveRun, mode: str, device: str, *, m: matrix.Matrix) -> None:
    """Profile each step (and, in train mode, the forward of functions that failed only in backward) into `run`
    (each trace read on the matrix `m`)."""
    bwd_only = {f for f, fl in run.failures.items() if fl.phase == "backward"}
    try:
        for name in steps.names:
            inst.reset()
            _, tr = run_profiled(steps, name, lambda n=name: steps.run(n), device, m=m)  # type: ignore[misc]
            run.traces[name] = tr
            run.records[name] = list(inst.records)
        if bwd_only and mode == Mode.TRAIN:
            # The forward of a function that failed only in backward ran the fast path: show it.
            inst.forced -= bwd_only
            inst.reset()
            _, tr = run_profiled(steps, "train-forward", steps.train_forward, device, m=m)
            run.traces["train-forward"] = tr
            run.records["train-forward"] = list(inst.records)
    except Exception as exc:  # noqa: BLE001 - it passed unprofiled: report, keep what was recorded
        run.step_error = f"the profiled step '{inst.step}' failed: {type(exc).__name__}: {first_line(exc)}"
        run.step_error_fast = any(r.fast for r in inst.records)
    finally:
        inst.forced |= bwd_only


def _compare_with_reference(steps: Steps, inst: Instrument, run: LiveRun, first: dict[str, dict[str, Any]],
                            tol: float) -> None:
    """Run every step again on the forced torch reference and compare (then isolate a mismatch) into `run`."""
    saved = set(inst.forced)
    inst.forced = set(inst.hooks)
    inst.reset()
    try:
        ref = run_all(steps)
        run.model_compare = compare_results(first, ref, tol)
        if run.model_compare.get("ok") is False:
            run.isolated = isolate(steps, inst, run, ref, tol)
    except Exception as exc:  # noqa: BLE001
        run.model_compare = {"error": f"the torch reference run failed: {type(exc).__name__}: "
                                      f"{first_line(exc)}", "ok": None}
    inst.forced = saved
    inst.reset()


def run_live(model: models.ResolvedModel, result: transformers.BindingResult, needs: models.Needs,
             mode: str, shape: str, tokens: int | None, benchmark: bool, verbose: bool = False, *,
             m: matrix.Matrix) -> LiveRun:
    """Build, run, profile and compare on the matrix `m`. Never raises for a kernel failure: that is a result."""
    data = layers.verify_data(m=m)
    device, dtype = _device()
    _full_needs_cuda(shape, device)
    ntok = tokens or int(data["tokens"][shape])
    t0 = time.perf_counter()
    say(f"building the {shape} {model.model_type} model from its config (random weights, no download) on {device}")
    built = layers.build(model, shape, device, dtype, attn_impl(model, needs), m=m)
    run = LiveRun(built=built, tokens=ntok, mode=mode,
                  package_of={f: b.package for f, b in result.bindings.items()})
    run.timing["build_s"] = round(time.perf_counter() - t0, 3)
    fallbacks = {f: m.functions[f].torch_fallback for f in result.bindings if f in m.functions}
    aliases: dict[str, tuple[str, ...]] = {}
    for e in m.transformers.get("misnamed", []):
        aliases[e["function"]] = (*aliases.get(e["function"], ()), e["registered"])
    inst = Instrument(result.module, result.bindings, built.model, result.regime, fallbacks, aliases)
    steps = Steps(built, inst, mode, ntok, verbose)
    cache = triton_cache_dir()
    before = cache_entries(cache)
    triton_pkgs = sorted({m.packages[h.package].title for h in inst.hooks.values()
                          if h.fast_bound and h.package in m.packages and m.packages[h.package].kind == "triton"})
    if triton_pkgs and device.startswith("cuda"):
        what = (f"compiling {', '.join(triton_pkgs)} kernels" + (" (cold Triton cache, this can take minutes)"
                                                                 if before == 0 else ""))
    else:
        what = "first run of the layers"
    tol = float(data["tolerance"][dtype])
    from kernelcheck.integrations import jit_caches

    # the tiny shape checks the path, it does not time it: one working config per autotuned kernel, not all of them
    with inst, jit_caches.first_config_only(shape == "tiny" and not benchmark) as trimmed:
        say(f"{what}: {', '.join(steps.names)} on {ntok} tokens ({built.parameters / 1e6:.1f} M parameters, "
             f"{dtype}{'; one config per autotuned Triton kernel' if trimmed else ''})")
        t1 = time.perf_counter()
        with steps_mod.ticker(what, cache), noise_mod.captured_logging(verbose) as got:
            first = _first_pass(steps, inst, run)
        steps_mod.CAPTURED.extend(got)
        run.timing["first_pass_s"] = round(time.perf_counter() - t1, 3)
        run.forced = set(inst.forced)
        after = cache_entries(cache)
        run.triton = {"cache_dir": str(cache), "entries_before": before, "entries_after": after,
                      "compiled": max(0, after - before), "cold": before == 0 and after > 0}
        if first is not None:
            t2 = time.perf_counter()
            say("profiling the steps")
            _profile_steps(steps, inst, run, mode, device, m=m)
            inst.reset()
            run.timing["profile_s"] = round(time.perf_counter() - t2, 3)
            t3 = time.perf_counter()
            run.direct = direct_compare(inst, tol)
            run.inline = {f: h.inline for f, h in inst.hooks.items() if h.inline}
            fast_ran = any(r.fast and not r.forced for recs in run.records.values() for r in recs)
            if fast_ran:
                say("comparing with the torch reference path on the same weights and inputs")
                _compare_with_reference(steps, inst, run, first, tol)
            else:
                run.model_compare = {"skipped": "every function ran its torch reference: the run is the reference"}
            run.timing["compare_s"] = round(time.perf_counter() - t3, 3)
            if benchmark:
                t4 = time.perf_counter()
                say("benchmarking the layer: bound path vs forced torch reference")
                run.benchmark = run_benchmark(steps, inst, model.spec.layer, mode, device,
                                           {f for f, fl in run.failures.items() if fl.phase == "backward"}, m=m)
                run.timing["benchmark_s"] = round(time.perf_counter() - t4, 3)
    return run




def _early_device(shape: str) -> str | None:
    """The device, known before the static check; None when torch does not import here: the static check then
    refuses the environment as doctor does (exit 2 without torch, 4 with a torch whose import fails)."""
    if shape == "full" and not _gpu_device_files():
        return "cpu"
    try:
        return _device()[0]
    except (Exception, SystemExit):  # noqa: BLE001 - any failure of torch's import is doctor's to judge
        return None


def verify(query: str, mode: str = Mode.TRAIN, shape: str = "tiny", benchmark: bool = False,
           tokens: int | None = None, command: str = "verify", verbose: bool = False, *,
           m: matrix.Matrix, compile_check: bool = False, cache_dir: str | None = None) -> Report:
    """`kernelcheck verify`: the doctor's static report plus what running the real layers showed. `verbose`
    (--verbose): third-party output of the run is left visible; `m`: the matrix the run decides on (the command's
    Context.matrix); `compile_check` (--compile): the layers under torch.compile too; `cache_dir` (--cache-dir): the
    cache proof for a folder `kernelcheck warm` baked, from the keys, before the layers run (doctor/cacheproof.py)."""
    from kernelcheck.doctor.run import doctor as run_doctor

    # at once, not after the static check and the model's import; without GPU device files, before torch's import
    if (early := _early_device(shape)) is not None:
        _full_needs_cuda(shape, early)
    t0 = time.perf_counter()
    if tokens is not None and early == "cpu":  # host memory, before the static check and any layer runs
        from kernelcheck.verify import packing_bounds

        packing_bounds.check_tokens(tokens, "--tokens" + (" with --compile" if compile_check else ""))
    with working("kernelcheck verify: static check (importing the model's modeling module)"):
        # verify's verdict is for the device it runs the layers on; it imports the modeling module itself
        report = run_doctor(query, mode, exact=True, m=m, run_here=True)
    report.command = command
    if cache_dir is not None:
        from kernelcheck.doctor import cacheproof

        cacheproof.attach(report, cache_dir, m=m)  # the prediction, before anything of the run compiles
    from kernelcheck.doctor import jitprobe

    jitprobe.attach(report, m=m)  # each JIT the chosen implementation uses compiles and runs a trivial kernel
    from kernelcheck.doctor.provider import verify_hub_note

    report.findings.extend(verify_hub_note(report))
    _add_live(report, query, mode, shape, benchmark, tokens, t0, verbose, m)
    if compile_check:
        _add_compiled(report, query, shape, m=m)
    return report


def _add_compiled(report: Report, query: str, shape: str, *, m: matrix.Matrix) -> None:
    """verify --compile: the same model under torch.compile, both passes (verify/compiled.py)."""
    import importlib

    from kernelcheck.verify import compiled
    from kernelcheck.verify.compiled_calls import FusedCalls

    model = transformers_models.resolve(query, m=m)
    result = transformers.bind(model.spec.module, model.spec.functions, exact=True, m=m)
    if result.module_error:
        return  # _add_live said verify-not-run
    needs = models.needs(model, tuple(result.bindings) if result.bindings else None, m=m)
    device, dtype = _device()
    with working(f"kernelcheck verify --compile: the {shape} model under torch.compile (infer and train)"):
        built = layers.build(model, shape, device, dtype, attn_impl(model, needs), m=m)
        fns = tuple(f.name for f in report.functions if f.used)
        fused = FusedCalls(importlib.import_module(result.module), result.bindings, fns)
        report.compiled = compiled.run(built, model.spec.layer or None, fns, fused=fused)
    static = next((f for f in report.findings if f.id == "compile-graph-breaks-static"), None)
    report.findings.extend(compiled.findings(report.compiled, query, static))


def _add_live(report: Report, query: str, mode: str, shape: str, benchmark: bool, tokens: int | None,
              t0: float, verbose: bool, m: matrix.Matrix) -> None:
    model = transformers_models.resolve(query, m=m)
    result = transformers.bind(model.spec.module, model.spec.functions, exact=True, m=m)  # the live closures
    static_s = round(time.perf_counter() - t0, 3)
    if result.module_error:
        report.findings.append(Finding("verify-not-run", Severity.BROKEN,
                                       "verify could not build the model: the modeling "
                                       f"module does not import ({result.module_error})."))
        report.live = LiveSection(ran=False, items=[NotRunLine()])
        return
    needs = models.needs(model, tuple(result.bindings) if result.bindings else None, m=m)
    steps_mod.CAPTURED.clear()
    run = run_live(model, result, needs, mode, shape, tokens, benchmark, verbose, m=m)
    run.timing = {"static_s": static_s, **run.timing}
    total = time.perf_counter() - t0
    run.timing["total_s"] = round(total, 3)
    run.timing["excluding_import_s"] = round(total - static_s, 3)
    for i, fs in enumerate(report.functions):
        ev = function_evidence(run, fs.name, m=m)
        if ev is None:
            if fs.used and not fs.name.startswith("attention:") and fs.status != Status.UNSUPPORTED:
                fs.evidence = {"calls": 0, "note": "not called in this run: none of the built layers "
                               f"({', '.join(dict.fromkeys(run.built.layer_types))}) calls it"}
            continue
        report.functions[i] = decide.decide(fs, observed=observation(report, fs, ev, run, m))
    report.findings.extend(model_findings(run, report))
    noise = "\n".join(steps_mod.CAPTURED)
    report.findings.extend(f for f in noise_mod.advice_findings(noise, m)
                           if f.id not in {g.id for g in report.findings})
    fast = [f.name for f in report.functions if f.evidence and f.evidence.get("path") == "fast"]
    if not run.built.device.startswith("cuda"):
        report.findings.append(Finding(
            "verify-cpu", Severity.INFO,
            "no CUDA GPU here: the layers ran on the CPU, where every fast function runs its torch reference (or is "
            "unsupported). The evidence shows the torch path; run verify on the GPU machine to prove the fast path."))
    b = run.built
    report.live = LiveSection(ran=True, details=LiveDetails(
        b.device, b.dtype, shape, run.tokens,
        LiveModel(b.model_type, b.model_class, b.shape, list(b.layer_types), b.device, b.dtype, b.parameters,
                   b.overrides, b.attn_implementation),
        fast, sorted(run.forced), {n: profiled_step(tr, b.device) for n, tr in run.traces.items()},
        comparison(run.model_compare), run.benchmark, TritonCacheState(**run.triton), Timing.from_json(run.timing),
    ), items=live_items(run) + ([CapturedLine(((None, noise_mod.summary(noise)),))] if noise.strip() else []),
        captured_output=noise_mod.summary(noise) if noise.strip() else None)




def merge_into(report: Report, model_query: str, mode: str, shape: str = "tiny", verbose: bool = False, *,
               m: matrix.Matrix) -> None:
    """`doctor --live`: add verify's per-function evidence and observed statuses to a doctor report."""
    t0 = time.perf_counter()
    _add_live(report, model_query, mode, shape, False, None, t0, verbose, m)
