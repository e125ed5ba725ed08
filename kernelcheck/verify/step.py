"""`kernelcheck verify --step`: a whole training step, bound kernels vs the torch reference, projected.

Each path runs in its own worker process (step_worker.py: bindings are fixed at import), one after the
other on the same device; this module starts them, reads their results, projects both to the real
layer counts (projection.py) and turns it into the report: numbers, findings and statuses.

To keep the check short, both workers start at once and only the GPU work is sequential: the bound
path builds its model and runs its first (compiling) step while this process runs doctor, and times its
steps only once doctor is done (its `timed_gate`); the reference path imports transformers and binds
meanwhile and waits (`start_gate`) until the bound path has finished before it builds anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelcheck.core import lifeline, matrix, settings
from kernelcheck.core.errors import BadInput, Interrupted
from kernelcheck.core.status import Finding, Mode, Severity
from kernelcheck.report.budget import BudgetSection
from kernelcheck.report.live import (
    CapturedLine,
    CheckCostLine,
    ControlsLine,
    LiveLine,
    ProjectedSpeedupLine,
    ProjectionLine,
    ProjectionMethodLine,
    SamePathLine,
    SpeedupLine,
    StepPathLine,
    WholeStepLine,
)
from kernelcheck.report.model import LiveSection, Report
from kernelcheck.report.step import (
    Failed,
    PathMeasured,
    Projection,
    StepCost,
    StepPath,
    StepSection,
    TritonCache,
    WorkerCost,
)
from kernelcheck.report.trace import FallbackSignature, LaunchDelay
from kernelcheck.verify import layers as layers_mod
from kernelcheck.verify import noise, projection, steps, timing_controls

PATHS = ("fast", "reference")


def say(msg: str) -> None:
    print(f"kernelcheck verify --step: {msg}", file=sys.stderr, flush=True)


def _device_shape(shape: str | None) -> str:
    import torch

    if shape is None:
        return "full" if torch.cuda.is_available() else "tiny"
    if shape == "full" and not torch.cuda.is_available():
        raise BadInput("--step --shape full builds real-width layers with the real vocabulary and needs a CUDA GPU; "
                       "there is none here. Use --shape tiny (the same code path, seconds on a CPU).")
    return shape


class _Worker:
    """One path's worker process, started early; `finish` waits for its result (bounded)."""

    def __init__(self, args: dict[str, Any], tmp: Path):
        self.path = args["path"]
        inp, self.out, self.logf = tmp / f"{self.path}.in.json", tmp / f"{self.path}.out.json", tmp / f"{self.path}.log"
        inp.write_text(json.dumps(args), encoding="utf-8")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.t0 = time.perf_counter()
        self._log = open(self.logf, "wb")  # noqa: SIM115 - closed in finish()
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelcheck.verify.step_worker", str(inp),
                                      str(self.out)], stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=lifeline.preexec())  # dies with kernelcheck

    def finish(self, timeout: float) -> tuple[dict[str, Any], str]:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return {"path": self.path, "error": f"the {self.path} path ran past {timeout:.0f} s"}, \
                noise.read_log(self.logf)
        finally:
            self._log.close()
        _stop_if_interrupted(self.proc.returncode)
        text = noise.read_log(self.logf)
        try:
            res = json.loads(self.out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            tail = " | ".join(text.strip().splitlines()[-3:])
            res = {"path": self.path, "error": f"the worker process died without a result ({tail[:400]})"}
            if self.proc.returncode == -signal.SIGKILL:  # not by us (kill() is for the timeout): the OOM killer
                res["error"] = ("the worker process was killed by SIGKILL, most likely by the kernel's out-of-memory "
                                f"killer ({tail[:300]})")
                res["out_of_memory"] = True
        res.setdefault("cost", {})["process_s"] = round(time.perf_counter() - self.t0, 3)
        return res, text

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _stop_if_interrupted(code: int | None) -> None:
    """A worker ended by SIGINT/SIGTERM (or its own exit after one) means the user stopped the check: the
    parent stops too, even where its own copy of the signal was lost, never reporting the path as failed."""
    if code in (-signal.SIGINT, -signal.SIGTERM):
        raise Interrupted(-code)
    if code == 128 + signal.SIGINT:
        raise Interrupted(signal.SIGINT)
    if code == 128 + signal.SIGTERM:
        raise Interrupted(signal.SIGTERM)


def _available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), None elsewhere (one reader: verify/packing_bounds.py)."""
    from kernelcheck.verify.packing_bounds import available_bytes

    return available_bytes()


def _check_context(query: str, fields: dict[str, Any], tokens: int | None) -> None:
    """--tokens past the model's context (its config's max_position_embeddings): exit 2 before torch is
    imported (the step would allocate for seconds and then fail)."""
    limit = fields.get("max_position_embeddings")
    if tokens is not None and isinstance(limit, int) and limit > 0 and tokens > limit:
        raise BadInput(f"--tokens {tokens:,} is more than {query} takes in one sequence (max_position_embeddings "
                       f"{limit:,}): give at most {limit:,}. Nothing was run.")


def _check_memory(cfg: Any, ntok: int, shape: str) -> None:
    """On the tiny shape (the CPU's), --tokens whose logits and their gradient alone (float32) need more than
    the memory available: exit 2 before any process starts. A GPU's memory is not probed here (that would
    start CUDA in this process): running out there is the verify-step-out-of-memory finding."""
    if shape == "full":
        return
    need = ntok * (int(getattr(cfg, "vocab_size", 0) or 0) * 4 * 2 + 16)
    have = _available_bytes()
    if have is not None and need > have:
        raise BadInput(f"--tokens {ntok:,}: the step's logits and their gradient alone need {need / 2**30:,.1f} GiB "
                       f"and this machine has {have / 2**30:,.1f} GiB available. Give fewer --tokens; nothing was "
                       "run.")


def verify_step(query: str, mode: str = Mode.TRAIN, shape: str | None = None, tokens: int | None = None,
                layers: int | None = None, checkpointing: bool | None = None, trace_dir: str | None = None,
                verbose: bool = False, *, m: matrix.Matrix, budget: bool = False) -> Report:
    """The doctor's static report plus the whole-step measurement of both paths and the projection, decided on
    the matrix `m` (the command's Context.matrix)."""
    from kernelcheck.doctor.run import doctor as run_doctor
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import step_model

    resolved = transformers_models.resolve(query, m=m)
    _check_context(query, layers_mod.text_config(resolved)[1], tokens)
    shape = _device_shape(shape)
    data = dict(layers_mod.verify_data(m=m)["step"])
    profiled = settings.count("KERNELCHECK_STEP_PROFILED")  # fewer profiled steps: smaller traces
    if profiled is not None:
        data["profiled"] = profiled
    t0 = time.perf_counter()
    cfg, _ = step_model.step_config(resolved, shape, layers, m=m)  # bad --layers: exit 2 before any run
    ntok = tokens or int(data["tokens"][shape])
    _check_memory(cfg, ntok, shape)
    ckpt = True if checkpointing is None else checkpointing
    results: dict[str, dict[str, Any]] = {}
    logs: dict[str, str] = {}
    keep = Path(trace_dir) if trace_dir else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    cache = steps.triton_cache_dir()
    cache_before = steps.cache_entries(cache)
    with tempfile.TemporaryDirectory(prefix="kernelcheck-step-") as tmp_s:
        tmp = Path(tmp_s)
        gates = {"fast": tmp / "fast.timed.go", "reference": tmp / "reference.go"}
        workers: dict[str, _Worker] = {}
        try:
            for path in PATHS:
                trace = worker_trace(tmp, path)
                args = {"query": query, "shape": shape, "path": path, "layers": layers, "tokens": ntok,
                        "checkpointing": ckpt, "warmup": data["warmup"], "timed": data["timed"],
                        "profiled": data["profiled"], "trace": str(trace),
                        # the overlap (module docstring): fast times its steps after doctor; reference starts
                        # its steps after fast has finished
                        ("timed_gate" if path == "fast" else "start_gate"): str(gates[path])}
                if path == "fast":  # the speedup's controls run on the bound path, the shorter timing
                    args["controls"] = {"repeats": int(data["control_repeats"]),
                                        "fraction": timing_controls.fraction(float(data["control_slowdown"]))}
                workers[path] = _Worker(args, tmp)
            say(f"fast path: building the {shape} step model and running {data['warmup'] + data['timed'] + 1} "
                 f"steps + {data['profiled']} profiled on {ntok} tokens (own process; the reference path imports "
                 "meanwhile and runs after it)")
            report = run_doctor(query, mode, exact=False, m=m, run_here=True)
            gates["fast"].touch()
            for path in PATHS:
                if path == "reference":
                    cache_after = steps.cache_entries(cache)
                    say("reference path: the same step with every function forced to its torch reference")
                    gates["reference"].touch()
                results[path], logs[path] = workers[path].finish(float(data["timeout_s"]))
                keep_trace(tmp, keep, path, results[path])
                if verbose and logs[path].strip():
                    print(f"--- {path} path output ---\n{logs[path].rstrip()}", file=sys.stderr)
        finally:
            for w in workers.values():
                w.kill()
        budgets = {p: _budget(p, results[p], (keep or tmp) / f"step-{p}.json.gz", (resolved, cfg), query, ntok, ckpt,
                              m=m)
                   for p in PATHS if budget}
    report.command = "verify"
    fast, ref = results["fast"], results["reference"]
    step = _summary(fast, ref, shape, ntok, ckpt, time.perf_counter() - t0,
                    _cache_state(cache, cache_before, cache_after, fast),
                    {p: noise.summary(t) for p, t in logs.items()})
    report.findings.extend(_findings(fast, ref, step.tokens, step.fast))
    report.findings.extend(control_findings(step))
    report.findings.extend(noise.advice_findings("\n".join(logs.values()), m))
    report.step = step
    report.budget = _with_projection(budgets, step)
    report.live = LiveSection(ran=True, items=live_items(step, verbose), step=True)
    return report


def worker_trace(tmp: Path, path: str) -> Path:
    """Where a step worker writes its trace: this run's own folder, never --trace-dir. The profiler writes the
    trace's own path into it unescaped, so a `"` in --trace-dir made a trace that does not parse (and a step
    that ran said BROKEN); `keep_trace` moves it there after the worker has read it."""
    return tmp / f"step-{path}.json.gz"


def keep_trace(tmp: Path, keep: Path | None, path: str, result: dict[str, Any]) -> None:
    """Move a path's trace to --trace-dir (`keep`) when its worker ran, and name it in the worker's result."""
    trace = worker_trace(tmp, path)
    if keep is not None and "error" not in result and trace.is_file():
        import shutil

        result["trace_file"] = str(shutil.move(str(trace), str(keep / trace.name)))


def _budget(path: str, r: dict[str, Any], trace: Path, model: tuple[Any, Any], query: str, tokens: int, ckpt: bool, *,
            m: matrix.Matrix) -> dict[str, Any]:
    """One path's step budget, from its profiled trace (read once, with the budget's collector) and the layers,
    parameters and tokens the worker built the step with; {"error": why} when the path did not run."""
    from collections import Counter

    from kernelcheck.budget import build, floors
    from kernelcheck.budget import run as budget_run

    if "error" in r or not trace.is_file():
        return {"error": r.get("error") or f"the {path} path wrote no trace"}
    resolved, cfg = model  # the floors count the widths the step was built with, the MFU the real layer counts
    real = floors.shape_of(layers_mod.text_config(resolved)[1])
    shape = dataclasses.replace(floors.shape_of(cfg.to_dict()), layer_types=real.layer_types)

    def work(_an: Any) -> build.ModelWork:
        return build.ModelWork(query, shape, Counter(r.get("layers") or []), tokens, ckpt,
                               parameters=int(r.get("parameters") or 0) or None)

    _, b = budget_run.trace_budget(trace, m=m, work=work)
    return b


def _with_projection(budgets: dict[str, dict[str, Any]], step: StepSection) -> BudgetSection | None:
    """The budgets, each step's MFU completed with its path's projection to the real layer counts (None: no
    budget was asked for)."""
    if not budgets:
        return None
    from kernelcheck.report.step import PathProjection

    out: dict[str, dict[str, Any]] = {}
    for path, b in budgets.items():
        if "error" in b:
            continue
        proj = getattr(step.projection, path, None)
        ms = proj.projected_step_ms if isinstance(proj, PathProjection) else None
        peak = b.get("peak")
        for st in b["steps"]:
            mfu = st.get("mfu")
            if mfu is not None and ms and peak:
                mfu["projected_step_ms"] = ms
                mfu["projected_full"] = round(mfu["full_model_flops"] / (ms / 1e3) / (peak["bf16_tflops"] * 1e12), 4)
        out[path] = b
    return BudgetSection(out)


def _measured(r: dict[str, Any]) -> StepPath:
    """One path's step from its worker's result (step_worker.py), or why it did not run."""
    if "error" in r:
        return Failed(r["error"])
    t = r["trace"]
    return PathMeasured(
        step_ms=r["step_ms"], tokens_per_s=r["tokens_per_s"], kernels_per_step=t["kernels_per_step"],
        cpu_ops_per_step=t["cpu_ops_per_step"], gpu_busy_fraction=t["gpu_busy_fraction"],
        launch_bound=bool(t["launch_bound_steps"]), trace_verdict=t["verdict"],
        fallback_signatures=[FallbackSignature.from_json(m) for m in t["fallback_signatures"]],
        fast_packages=t["fast_packages"], launch_delay_ms=LaunchDelay(**t["launch_delay_ms"]),
        peak_memory_bytes=r["peak_memory_bytes"],
        peak_memory_kind=r["peak_memory_kind"], implementations=r["implementations"],
        phases=r["breakdown"]["phases"], layer_types=r["breakdown"]["layer_types"],
        device=r["device"], dtype=r["dtype"], layers=r["layers"], parameters=r["parameters"],
        fused_adamw=r["fused_adamw"], cost=WorkerCost(**r["cost"]), trace_file=r.get("trace_file"),
        timed_steps_ms=r["timed_steps_ms"], first_loss=r["first_loss"])


def _summary(fast: dict[str, Any], ref: dict[str, Any], shape: str, tokens: int, ckpt: bool, total_s: float,
             cache: TritonCache, captured: dict[str, str]) -> StepSection:
    """The step section: both paths, the measured speedup and kernel ratio, the projection and the cost."""
    pf, pr = _measured(fast), _measured(ref)
    speedup = kernel_ratio = None
    same = same_path(pf, pr)
    controls = timing_controls.TimingControls.from_json(fast["controls"]) if "controls" in fast else None
    if same:  # both paths ran the same code: their ratio, a projection of it, a cache state would all be noise
        why = Failed(SAME_PATH)
        fc = fast.get("cost", {})
        cost = StepCost(round(total_s, 3), fc.get("first_step_s"), fc.get("process_s"),
                        ref.get("cost", {}).get("process_s"),
                        TritonCache(cache.dir, cache.entries_before, cache.entries_added, "none", cache.first_step_s,
                                    "both paths ran the same code: no fast path whose Triton kernels to count"))
        return StepSection(shape, tokens, ckpt, pf, pr, Projection(why, why, projection.compare(fast, ref)["method"]),
                           cost, captured, None, None, same_path=True, controls=controls, ratio=_ratio(pf, pr))
    speedup = _ratio(pf, pr)
    if isinstance(pf, PathMeasured) and isinstance(pr, PathMeasured) and speedup is not None and pf.kernels_per_step:
        kernel_ratio = round(pr.kernels_per_step / pf.kernels_per_step, 1)
    fc = fast.get("cost", {})
    cost = StepCost(round(total_s, 3), fc.get("first_step_s"), fc.get("process_s"),
                    ref.get("cost", {}).get("process_s"), cache)
    return with_controls(StepSection(shape, tokens, ckpt, pf, pr, Projection.from_json(projection.compare(fast, ref)),
                                     cost, captured, speedup, kernel_ratio), controls)


def with_controls(step: StepSection, controls: timing_controls.TimingControls | None) -> StepSection:
    """The section with its ratio's controls: the measured ratio kept as `ratio`; the speedup, kernel ratio and
    projected speedup only where the controls decide it (no controls ran: the section as it was)."""
    if controls is None:
        return step
    ratio = step.speedup
    if ratio is None or controls.decides(ratio):
        return dataclasses.replace(step, controls=controls, ratio=ratio)
    return dataclasses.replace(step, controls=controls, ratio=ratio, speedup=None, kernel_ratio=None,
                               projection=dataclasses.replace(step.projection, projected_speedup=None))


def _ratio(pf: StepPath, pr: StepPath) -> float | None:
    """The reference's step time over the bound path's, both measured (None otherwise)."""
    if isinstance(pf, PathMeasured) and isinstance(pr, PathMeasured) and pf.step_ms > 0:
        return round(pr.step_ms / pf.step_ms, 2)
    return None


def control_findings(step: StepSection) -> list[Finding]:
    """`step-control-cannot-decide`: fallback where the positive control (a known injected slowdown) was not
    detected (this measurement cannot tell a slower path here); info where the ratio lies inside the A/A noise
    band (no speedup is claimed). Nothing where no controls ran (the bound path failed)."""
    c = step.controls
    if c is None:
        return []
    if not c.detected:
        return [Finding("step-control-cannot-decide", Severity.FALLBACK,
                        "this measurement cannot decide here: " + timing_controls.why_undecided(c, step.ratio)
                        + "; no speedup or projected speedup is claimed.",
                        "rerun --step on an idle machine, with more --tokens (a longer step) or on the GPU")]
    if step.ratio is not None and not step.same_path and not c.decides(step.ratio):
        return [Finding("step-control-cannot-decide", Severity.INFO,
                        "the bound path is not measurably faster: " + timing_controls.why_undecided(c, step.ratio)
                        + "; no speedup or projected speedup is claimed.")]
    return []


SAME_PATH = "both paths ran the same implementations: nothing to project"


def same_path(pf: StepPath, pr: StepPath) -> bool:
    """Both paths measured and both ran the same implementations of every function (no triton, no kernel
    package: the torch code twice)."""
    return (isinstance(pf, PathMeasured) and isinstance(pr, PathMeasured) and bool(pf.implementations)
            and sorted(pf.implementations) == sorted(pr.implementations))


def _cache_state(cache: Path, before: int, after: int, fast: dict[str, Any]) -> TritonCache:
    """Whether this run paid for compiling (cold: the bound path added Triton cache entries) or not (warm)."""
    added = max(0, after - before)
    return TritonCache(str(cache), before, added, "cold" if added else "warm",
                       fast.get("cost", {}).get("first_step_s"),
                       "the bound path's first step compiled and autotuned its Triton kernels; a rerun with this "
                       "cache is the warm cost" if added else
                       "nothing was compiled: every Triton kernel came from the cache (or none is used)")


def _findings(fast: dict[str, Any], ref: dict[str, Any], tokens: int, bound: StepPath) -> list[Finding]:
    """The step's findings from both workers' results (`bound`: the bound path's step, or why it failed)."""
    out: list[Finding] = []
    oom = [n for n, r in (("bound path", fast), ("torch reference", ref)) if r.get("out_of_memory")]
    if oom:
        # a limit of this check on this machine, never a kernel verdict: fallback severity only because a
        # check that could not run is never READY (as doctor's no-model)
        out.append(Finding("verify-step-out-of-memory", Severity.FALLBACK,
                           f"the {' and the '.join(oom)} ran out of memory on this machine at {tokens:,} "
                           "tokens per step: a limit of the check, not a verdict on the kernels (no function is "
                           "marked broken for it).",
                           "rerun with fewer --tokens (or fewer --layers), or on a machine with more memory"))
        if isinstance(bound, Failed) and fast.get("out_of_memory"):
            return out
    if isinstance(bound, Failed):
        out.append(Finding("verify-step-failed", Severity.BROKEN,
                           f"the training step on the bound path failed: {bound.error}",
                           "rerun with --verbose for the worker's output; kernelcheck verify --model M (per function)"))
        return out
    if "error" in ref and not ref.get("out_of_memory"):
        out.append(Finding("verify-step-reference-failed", Severity.WARNING,
                           f"the torch-reference step failed, so there is no speedup to report: {ref['error']}"))
    if bound.device.startswith("cuda"):
        for m in bound.fallback_signatures:
            out.append(Finding(f"step-{m.id}", Severity.FALLBACK,
                               f"the bound path's whole step still shows {m.id} ({m.evidence}): a torch "
                               f"reference runs for {', '.join(m.functions)}.",
                               f"kernelcheck install --model M (needs {m.package})", None, tuple(m.functions)))
        if bound.launch_bound:
            out.append(Finding("step-launch-bound", Severity.FALLBACK,
                               "the bound path's step is launch-bound: the GPU waits for the CPU to launch kernels."))
        if same_path(bound, _measured(ref)):
            out.append(Finding("verify-step-same-path", Severity.INFO,
                               "both paths ran the same implementations on this GPU (no fast kernel is bound): "
                               "the step was measured, with no speedup, projection or cache state to report",
                               "kernelcheck install --model M, then rerun --step to measure the fast path"))
    else:
        out.append(Finding("verify-cpu", Severity.INFO,
                           "no CUDA GPU here: both paths ran the torch code on the CPU, so the speedup measures "
                           "nothing; the numbers check that the step runs. Run --step on the GPU machine."))
    return out


def live_items(step: StepSection, verbose: bool) -> list[LiveLine]:
    """What the live section says about the step (report/live_text.py writes it): the step, both paths, the
    speedup, both projections, how they are made, the check's cost and (without --verbose) the captured output."""
    out: list[LiveLine] = [WholeStepLine(step.shape, step.tokens, step.checkpointing, step.measured()),
                           StepPathLine("fast", step.fast), StepPathLine("reference", step.reference)]
    if step.same_path:
        m = step.measured()
        out.append(SamePathLine(tuple(m.implementations) if m is not None else ()))
        if step.controls is not None:
            out.append(ControlsLine(step.controls, step.ratio, False))
        out.append(CheckCostLine(step.cost))
        if not verbose:
            out.append(CapturedLine(tuple(step.captured_output.items())))
        return out
    if step.speedup is not None:
        out.append(SpeedupLine(step.speedup, step.kernel_ratio))
    if step.controls is not None:
        out.append(ControlsLine(step.controls, step.ratio, step.speedup is not None))
    pj = step.projection
    out += [ProjectionLine("fast", pj.fast), ProjectionLine("reference", pj.reference)]
    if pj.projected_speedup is not None:
        out.append(ProjectedSpeedupLine(pj.projected_speedup))
    out += [ProjectionMethodLine(), CheckCostLine(step.cost)]
    if not verbose:
        out.append(CapturedLine(tuple(step.captured_output.items())))
    return out
