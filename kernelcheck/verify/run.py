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

import functools
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck.core import matrix as matrix_mod
from kernelcheck.core import models as models_mod
from kernelcheck.core.errors import BadInput, KernelcheckError
from kernelcheck.integrations import transformers as bindings_mod
from kernelcheck.report.model import Finding, FunctionStatus, Report
from kernelcheck.verify import evidence as evidence_mod
from kernelcheck.verify import layers as layers_mod
from kernelcheck.verify.instrument import CallRecord, Instrument

SHAPES = ("tiny", "full")


def _say(msg: str) -> None:
    """Progress for people, on stderr (stdout stays one JSON object with --json)."""
    print(f"kernelcheck verify: {msg}", file=sys.stderr, flush=True)


# -- Triton cache ---------------------------------------------------------------------------------
def triton_cache_dir() -> Path:
    """Where Triton keeps compiled kernels: TRITON_CACHE_DIR, else ~/.triton/cache (Triton's default)."""
    env = os.environ.get("TRITON_CACHE_DIR")
    if env:
        return Path(env)
    home = os.environ.get("TRITON_HOME")
    return (Path(home) if home else Path.home()) / ".triton" / "cache"


def cache_entries(path: Path) -> int:
    """Compiled-kernel entries (one folder per kernel hash)."""
    try:
        return sum(1 for p in path.iterdir() if p.is_dir())
    except OSError:
        return 0


class _Ticker:
    """Prints what is compiling, with elapsed seconds, while a slow first call runs."""

    def __init__(self, what: str, cache: Path, first_after: float = 5.0, every: float = 15.0):
        self.what, self.cache, self.first_after, self.every = what, cache, first_after, every
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._start_entries = cache_entries(cache)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=1)

    def _run(self) -> None:
        wait = self.first_after
        while not self._stop.wait(wait):
            new = cache_entries(self.cache) - self._start_entries
            _say(f"{self.what} ({time.perf_counter() - self._t0:.0f} s elapsed; Triton cache {self.cache}: "
                 f"{new:+d} entries so far)")
            wait = self.every


# -- the run --------------------------------------------------------------------------------------
@dataclass
class Failure:
    function: str
    phase: str  # forward | backward | output | comparison
    step: str
    error: str
    implementation: str = "?"


@dataclass
class LiveRun:
    """Everything observed, before it becomes report statuses."""

    built: layers_mod.BuiltModel
    tokens: int
    mode: str
    records: dict[str, list[CallRecord]] = field(default_factory=dict)  # step -> calls in the profiled pass
    traces: dict[str, evidence_mod.StepTrace] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)
    forced: set[str] = field(default_factory=set)
    step_error: str | None = None  # the step failed outside any instrumented function
    step_error_fast: bool = False  # ... after a fast kernel had run in that attempt
    nonfinite: set[str] = field(default_factory=set)  # functions that made NaN/Inf from finite inputs
    direct: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-function fast vs reference
    model_compare: dict[str, Any] = field(default_factory=dict)
    isolated: dict[str, dict[str, Any]] = field(default_factory=dict)  # fn alone on the fast path vs reference
    benchmark: dict[str, Any] | None = None
    timing: dict[str, float] = field(default_factory=dict)
    package_of: dict[str, str] = field(default_factory=dict)  # function -> package import name
    inline: dict[str, str] = field(default_factory=dict)  # old regime: function -> the layer code that inlines it
    triton: dict[str, Any] = field(default_factory=dict)


class _BackwardFailed(Exception):
    def __init__(self, original: BaseException):
        super().__init__(str(original))
        self.original = original


class _Steps:
    """The real steps: train (forward + backward), prefill with cache, one cached decode step."""

    def __init__(self, built: layers_mod.BuiltModel, inst: Instrument, mode: str, tokens: int):
        import torch

        self.torch = torch
        self.built, self.inst, self.mode = built, inst, mode
        g = torch.Generator().manual_seed(1234)
        vocab = int(built.model.config.vocab_size)
        self.ids = torch.randint(0, vocab, (1, tokens), generator=g).to(built.device)
        self.next_id = torch.randint(0, vocab, (1, 1), generator=g).to(built.device)
        self.cache: Any = None
        self.names = ["train", "prefill", "decode"] if mode == "train" else ["prefill", "decode"]

    def sync(self) -> None:
        if self.built.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def run(self, name: str) -> dict[str, Any]:
        self.inst.step = name
        return getattr(self, "_" + name)()

    def _train(self) -> dict[str, Any]:
        torch, model = self.torch, self.built.model
        model.train()
        model.zero_grad(set_to_none=True)
        self.inst.mark_backward = True
        try:
            with torch.enable_grad():
                out = model(input_ids=self.ids, labels=self.ids, use_cache=False)
                try:
                    out.loss.backward()
                except Exception as exc:
                    raise _BackwardFailed(exc) from exc
        finally:
            self.inst.mark_backward = False
        self.sync()
        grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        return {"logits": out.logits.detach().float(), "loss": out.loss.detach().float(), "grads": grads}

    def _prefill(self) -> dict[str, Any]:
        torch, model = self.torch, self.built.model
        model.eval()
        with torch.no_grad():
            out = model(input_ids=self.ids, use_cache=True)
        self.cache = getattr(out, self.built.cache_kwarg, None)  # the old name warns on 5.24
        self.sync()
        return {"logits": out.logits.float()}

    def _decode(self) -> dict[str, Any]:
        torch, model = self.torch, self.built.model
        if self.cache is None:
            raise KernelcheckError("the prefill returned no cache, so the cached decode step cannot run")
        with torch.no_grad():
            out = model(input_ids=self.next_id, use_cache=True, **{self.built.cache_kwarg: self.cache})
        self.sync()
        return {"logits": out.logits.float()}

    def train_forward(self) -> None:
        """A forward of the training step without backward (evidence for a function whose backward fails)."""
        torch, model = self.torch, self.built.model
        self.inst.step = "train"
        model.train()
        with torch.no_grad():
            model(input_ids=self.ids, use_cache=False)
        self.sync()


def _run_all(steps: _Steps) -> dict[str, dict[str, Any]]:
    return {name: steps.run(name) for name in steps.names}


def _blame(inst: Instrument, exc: BaseException) -> tuple[CallRecord | None, BaseException]:
    if isinstance(exc, _BackwardFailed):
        return inst.blame_backward(exc.original), exc.original
    for rec in reversed(inst.records):
        if rec.error:
            return rec, exc
    return None, exc


def _first_pass(steps: _Steps, inst: Instrument, run: LiveRun) -> dict[str, dict[str, Any]] | None:
    """Run every step once, unprofiled (compiles and autotunes Triton kernels). A function that raises is
    recorded as broken and forced onto its torch reference, and the steps run again, so the other
    functions still get tested."""
    for _ in range(len(inst.hooks) + 1):
        inst.reset()
        inst.capture = {}
        inst.capture_steps = {"prefill", "decode"}
        inst.check_values = True
        try:
            results = _run_all(steps)
            run.nonfinite = {r.function for r in inst.records if r.nonfinite and not r.forced}
            return results
        except Exception as exc:  # noqa: BLE001 - a failing kernel is what verify is looking for
            rec, original = _blame(inst, exc)
            msg = f"{type(original).__name__}: {_first_line(original)}"
            if rec is None or rec.function in inst.forced:
                run.step_error = f"step '{steps.inst.step}' failed: {msg}"
                run.step_error_fast = any(r.fast for r in inst.records)
                return None
            run.failures[rec.function] = Failure(rec.function, rec.error_phase or "forward", rec.step, msg,
                                                 rec.implementation)
            _say(f"{rec.function} raised in {rec.error_phase or 'forward'} ({msg[:160]}); marking it broken and "
                 "re-running with its torch reference so the other functions are still checked")
            inst.forced.add(rec.function)
        finally:
            inst.capture_steps = set()
            inst.check_values = False
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:400] if text else ""


def _profile(steps: _Steps, name: str, fn: Callable[[], Any], device: str) -> tuple[Any, evidence_mod.StepTrace]:
    """Run `fn` under torch.profiler (CPU, plus CUDA on a GPU) and attribute its trace."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        acts.append(ProfilerActivity.CUDA)
    steps.inst.profiling = True
    try:
        with profile(activities=acts, record_shapes=False) as prof:
            result = fn()
    finally:
        steps.inst.profiling = False
    with tempfile.TemporaryDirectory(prefix="kernelcheck-trace-") as tmp:
        path = Path(tmp) / f"{name}.json"
        prof.export_chrome_trace(str(path))
        events, meta = evidence_mod.load_events(path)
    return result, evidence_mod.analyze(name, events, meta)


def _rel_err(a: Any, b: Any) -> tuple[float, float]:
    """(relative L2 error, max abs error) of a against reference b, in fp32."""
    a, b = a.detach().float(), b.detach().float()
    if a.shape != b.shape:
        return math.inf, math.inf
    diff = (a - b)
    denom = float(b.norm()) or 1.0
    return float(diff.norm()) / denom, float(diff.abs().max()) if diff.numel() else 0.0


def _compare_outputs(fast: Any, ref: Any) -> tuple[float, float, bool]:
    """Worst (rel, abs) error over the tensors of two outputs; and whether the fast one has NaN/Inf."""
    import torch

    fa = [t for t in (fast if isinstance(fast, (tuple, list)) else [fast]) if isinstance(t, torch.Tensor)]
    ra = [t for t in (ref if isinstance(ref, (tuple, list)) else [ref]) if isinstance(t, torch.Tensor)]
    worst_rel = worst_abs = 0.0
    nonfinite = False
    for a, b in zip(fa, ra):
        if a.is_floating_point() and not bool(torch.isfinite(a).all()):
            nonfinite = True
        rel, ab = _rel_err(a, b)
        worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, ab)
    return worst_rel, worst_abs, nonfinite


def _direct_compare(inst: Instrument, tol: float) -> dict[str, dict[str, Any]]:
    """Each captured function called twice on the same inputs: the bound path and the torch reference."""
    out: dict[str, dict[str, Any]] = {}
    for fn, hook in inst.hooks.items():
        if fn not in inst.capture:
            continue
        if not hook.fast_bound:
            out[fn] = {"compared": False, "why": "the torch reference itself is bound: nothing to compare"}
            continue
        if hook.torch_function is None:
            out[fn] = {"compared": False, "why": "the reference is inline code in the layer"}
            continue
        try:
            ref = inst.call_direct(fn, reference=True)
        except Exception as exc:  # noqa: BLE001
            out[fn] = {"compared": False, "why": f"the torch reference raised {type(exc).__name__}: {exc}"}
            continue
        try:
            fast = inst.call_direct(fn, reference=False)
        except Exception as exc:  # noqa: BLE001
            out[fn] = {"compared": False, "error": f"{type(exc).__name__}: {_first_line(exc)}"}
            continue
        rel, ab, nonfinite = _compare_outputs(fast, ref)
        out[fn] = {"compared": True, "rel_err": _round(rel), "max_abs_err": _round(ab), "tolerance": tol,
                   "nonfinite": nonfinite, "ok": (not nonfinite) and rel <= tol}
    return out


def _round(x: float) -> float | None:
    if math.isinf(x) or math.isnan(x):
        return None
    return float(f"{x:.3g}")


def _compare_results(fast: dict[str, dict[str, Any]], ref: dict[str, dict[str, Any]], tol: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for step, res in fast.items():
        if step not in ref:
            continue
        entry: dict[str, Any] = {}
        rel, ab = _rel_err(res["logits"], ref[step]["logits"])
        entry["logits"] = {"rel_err": _round(rel), "max_abs_err": _round(ab), "ok": rel <= tol}
        if "grads" in res:
            # Global relative error over all gradients, plus the worst single parameter: in bf16 a tiny
            # gradient (A_log, dt_bias) can carry a large relative error from rounding alone, so a single
            # parameter only fails the check at 10x the tolerance; wrong kernels (fla#640) are off by O(1).
            worst, worst_name, num, den = 0.0, "", 0.0, 0.0
            for name, g in res["grads"].items():
                r_g = ref[step]["grads"].get(name)
                if r_g is None:
                    continue
                r, _ = _rel_err(g, r_g)
                num += float((g - r_g).norm()) ** 2
                den += float(r_g.norm()) ** 2
                if not r <= worst:
                    worst, worst_name = r, name
            glob = math.sqrt(num) / (math.sqrt(den) or 1.0)
            entry["grads"] = {"rel_err": _round(glob), "worst_parameter": worst_name,
                              "worst_parameter_rel_err": _round(worst), "parameters": len(res["grads"]),
                              "ok": glob <= tol and worst <= 10 * tol}
        entry["ok"] = all(v["ok"] for v in entry.values() if isinstance(v, dict))
        out[step] = entry
    out["tolerance"] = tol
    out["ok"] = all(v["ok"] for k, v in out.items() if isinstance(v, dict))
    return out


def _isolate(steps: _Steps, inst: Instrument, run: LiveRun, ref: dict[str, dict[str, Any]],
             tol: float) -> dict[str, dict[str, Any]]:
    """The results disagree: run again with one function at a time on its bound path, the rest on the
    reference, to name the function whose output or gradients are wrong (fla#640 before 0.5 was silent)."""
    out: dict[str, dict[str, Any]] = {}
    for fn, hook in inst.hooks.items():
        if not hook.fast_bound or fn in run.failures:
            continue
        inst.forced = set(inst.hooks) - {fn}
        inst.reset()
        try:
            out[fn] = _compare_results(_run_all(steps), ref, tol)
        except Exception as exc:  # noqa: BLE001
            out[fn] = {"error": f"{type(exc).__name__}: {_first_line(exc)}", "ok": None}
    return out


# -- benchmark ------------------------------------------------------------------------------------
def _benchmark(steps: _Steps, inst: Instrument, layer_class: str, mode: str, device: str,
               bwd_broken: set[str]) -> dict[str, Any]:
    """Time the model's own layer (e.g. Qwen3_5GatedDeltaNet) on the bound path and on the forced torch
    reference, on the same captured inputs, in this process."""
    import torch

    layer_mods = layers_mod.layer_modules(steps.built.model, layer_class)
    if not layer_mods:
        return {"skipped": f"no {layer_class or 'kernel-calling'} layer in the built model"}
    layer = layer_mods[0]
    got: dict[str, Any] = {}

    def grab(_m: Any, args: tuple, kwargs: dict) -> None:
        if "x" not in got:
            got["x"] = (tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args),
                        {k: (v.detach().clone() if isinstance(v, torch.Tensor) else
                             None if "cache" in type(v).__name__.lower() or k in ("cache", "past_key_values",
                                                                                   "cache_params") else v)
                         for k, v in kwargs.items()})

    handle = layer.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            steps.built.model(input_ids=steps.ids, use_cache=False)
    finally:
        handle.remove()
    args, kwargs = got["x"]
    data = layers_mod.verify_data()["benchmark"]
    gen = torch.Generator(device="cpu").manual_seed(7)

    def once_fwd() -> None:
        with torch.no_grad():
            layer(*args, **kwargs)

    # the layer's input (hidden_states) comes positionally or by keyword depending on the decoder layer
    key: int | str = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()),
                          next((k for k, v in kwargs.items() if isinstance(v, torch.Tensor) and v.is_floating_point()),
                               0))

    def once_train() -> None:
        a, kw = list(args), dict(kwargs)
        if isinstance(key, int):
            a[key] = a[key].detach().requires_grad_(True)
        else:
            kw[key] = kw[key].detach().requires_grad_(True)
        out = layer(*a, **kw)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(grad)

    with torch.no_grad():
        probe = layer(*args, **kwargs)
    probe = probe[0] if isinstance(probe, tuple) else probe
    grad = torch.randn(probe.shape, generator=gen).to(device=probe.device, dtype=probe.dtype)
    everything = set(inst.hooks)
    saved = set(inst.forced)
    # A function that failed only in backward still runs fast in a forward-only pass (fla#640 case).
    passes = [("forward", once_fwd, saved - bwd_broken)]
    if mode == "train":
        passes.append(("forward+backward", once_train, saved))
    out: dict[str, Any] = {"layer": type(layer).__name__, "tokens": int(steps.ids.shape[1]), "passes": {}}
    inst.step = "bench"
    try:
        for pname, once, fast_forced in passes:
            res: dict[str, Any] = {}
            for path, forced in (("fast", fast_forced), ("reference", everything)):
                inst.forced = set(forced)
                try:
                    res[path] = _time(steps, once, data, device, f"bench-{pname}-{path}")
                except Exception as exc:  # noqa: BLE001
                    res[path] = {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
                res[path]["forced_torch"] = sorted(forced)
                inst.reset()
            f, r = res["fast"], res["reference"]
            if "ms" in f and "ms" in r and f["ms"] > 0:
                res["speedup"] = round(r["ms"] / f["ms"], 2)
                if f["kernels"]:
                    res["kernel_ratio"] = round(r["kernels"] / f["kernels"], 1)
                res["cpu_op_ratio"] = round(r["cpu_ops"] / max(1, f["cpu_ops"]), 1)
            if fast_forced:
                res["note"] = ("the bound path keeps " + ", ".join(sorted(fast_forced)) + " on the torch reference: "
                               "it failed in this environment")
            out["passes"][pname] = res
    finally:
        inst.forced = saved
    main = "forward+backward" if mode == "train" else "forward"
    out.update({"pass": main, **out["passes"][main]})
    return out


def _time(steps: _Steps, once: Callable[[], None], data: dict[str, Any], device: str, name: str) -> dict[str, Any]:
    """Median wall time of `once` (synchronised), then one profiled call for its kernel and op counts."""
    for _ in range(int(data["warmup"])):
        once()
    steps.sync()
    times: list[float] = []
    t_all = time.perf_counter()
    while len(times) < int(data["max_iters"]):
        t0 = time.perf_counter()
        once()
        steps.sync()
        times.append(time.perf_counter() - t0)
        if len(times) >= int(data["min_iters"]) and time.perf_counter() - t_all > float(data["min_seconds"]):
            break
    _, tr = _profile(steps, name, once, device)
    times.sort()
    bf = tr.stats.busy_fraction
    return {"ms": round(times[len(times) // 2] * 1000, 3), "iters": len(times), "kernels": tr.kernels,
            "cpu_ops": tr.cpu_ops, "gpu_busy_fraction": None if bf is None else round(bf, 3),
            "launch_bound": tr.launch_bound}


# -- orchestration --------------------------------------------------------------------------------
def _device() -> tuple[str, str]:
    import torch

    if torch.cuda.is_available():
        return "cuda:0", "bfloat16"
    return "cpu", "float32"


def _attn_impl(model: models_mod.ResolvedModel, needs: models_mod.Needs) -> str | None:
    """The config's own attn_implementation when it names one that can load here; None: the class default."""
    asked = (model.text_config.get("_attn_implementation") or model.config.get("_attn_implementation")
             or model.config.get("attn_implementation"))
    if not asked:
        return None
    if not needs.attention_package:
        return asked
    import importlib.util

    return asked if importlib.util.find_spec(needs.attention_package) else None


def run_live(model: models_mod.ResolvedModel, result: bindings_mod.BindingResult, needs: models_mod.Needs,
             mode: str, shape: str, tokens: int | None, benchmark: bool) -> LiveRun:
    """Build, run, profile and compare. Never raises for a kernel failure: that is a result."""
    m = matrix_mod.load()
    data = layers_mod.verify_data()
    device, dtype = _device()
    if shape == "full" and not device.startswith("cuda"):
        raise BadInput("--shape full builds one real-size layer of each type (the 27B GDN layer is hidden 5120 with "
                       "48 value heads) and needs a CUDA GPU: on this machine there is none, every function runs "
                       "its torch reference anyway, and the full layer would take minutes in fp32 on the CPU. Use "
                       "--shape tiny here (the same code path), or run --shape full on the GPU machine.")
    ntok = tokens or int(data["tokens"][shape])
    t0 = time.perf_counter()
    _say(f"building the {shape} {model.model_type} model from its config (random weights, no download) on {device}")
    built = layers_mod.build(model, shape, device, dtype, _attn_impl(model, needs))
    run = LiveRun(built=built, tokens=ntok, mode=mode,
                  package_of={f: b.package for f, b in result.bindings.items()})
    run.timing["build_s"] = round(time.perf_counter() - t0, 3)
    fallbacks = {f: m.functions[f].torch_fallback for f in result.bindings if f in m.functions}
    aliases: dict[str, tuple[str, ...]] = {}
    for e in m.transformers.get("misnamed", []):
        aliases[e["function"]] = (*aliases.get(e["function"], ()), e["registered"])
    inst = Instrument(result.module, result.bindings, built.model, result.regime, fallbacks, aliases)
    steps = _Steps(built, inst, mode, ntok)
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
    with inst:
        _say(f"{what}: {', '.join(steps.names)} on {ntok} tokens ({built.parameters / 1e6:.1f} M parameters, "
             f"{dtype})")
        t1 = time.perf_counter()
        with _Ticker(what, cache):
            first = _first_pass(steps, inst, run)
        run.timing["first_pass_s"] = round(time.perf_counter() - t1, 3)
        run.forced = set(inst.forced)
        after = cache_entries(cache)
        run.triton = {"cache_dir": str(cache), "entries_before": before, "entries_after": after,
                      "compiled": max(0, after - before), "cold": before == 0 and after > 0}
        if first is not None:
            t2 = time.perf_counter()
            _say("profiling the steps")
            bwd_only = {f for f, fl in run.failures.items() if fl.phase == "backward"}
            try:
                for name in steps.names:
                    inst.reset()
                    _, tr = _profile(steps, name, functools.partial(steps.run, name), device)
                    run.traces[name] = tr
                    run.records[name] = list(inst.records)
                if bwd_only and mode == "train":
                    # The forward of a function that failed only in backward ran the fast path: show it.
                    inst.forced -= bwd_only
                    inst.reset()
                    _, tr = _profile(steps, "train-forward", steps.train_forward, device)
                    run.traces["train-forward"] = tr
                    run.records["train-forward"] = list(inst.records)
            except Exception as exc:  # noqa: BLE001 - it passed unprofiled: report, keep what was recorded
                run.step_error = f"the profiled step '{inst.step}' failed: {type(exc).__name__}: {_first_line(exc)}"
                run.step_error_fast = any(r.fast for r in inst.records)
            finally:
                inst.forced |= bwd_only
            inst.reset()
            run.timing["profile_s"] = round(time.perf_counter() - t2, 3)
            t3 = time.perf_counter()
            run.direct = _direct_compare(inst, tol)
            run.inline = {f: h.inline for f, h in inst.hooks.items() if h.inline}
            fast_ran = any(r.fast and not r.forced for recs in run.records.values() for r in recs)
            if fast_ran:
                _say("comparing with the torch reference path on the same weights and inputs")
                saved = set(inst.forced)
                inst.forced = set(inst.hooks)
                inst.reset()
                try:
                    ref = _run_all(steps)
                    run.model_compare = _compare_results(first, ref, tol)
                    if run.model_compare.get("ok") is False:
                        run.isolated = _isolate(steps, inst, run, ref, tol)
                except Exception as exc:  # noqa: BLE001
                    run.model_compare = {"error": f"the torch reference run failed: {type(exc).__name__}: "
                                                  f"{_first_line(exc)}", "ok": None}
                inst.forced = saved
                inst.reset()
            else:
                run.model_compare = {"skipped": "every function ran its torch reference: the run is the reference"}
            run.timing["compare_s"] = round(time.perf_counter() - t3, 3)
            if benchmark:
                t4 = time.perf_counter()
                _say("benchmarking the layer: bound path vs forced torch reference")
                run.benchmark = _benchmark(steps, inst, model.spec.layer, mode, device,
                                           {f for f, fl in run.failures.items() if fl.phase == "backward"})
                run.timing["benchmark_s"] = round(time.perf_counter() - t4, 3)
    return run


# -- from observations to statuses ------------------------------------------------------------------
def function_evidence(run: LiveRun, fn: str) -> dict[str, Any] | None:
    """The evidence block for one function: what ran, how often, what it launched, how it compared."""
    calls = [r for recs in run.records.values() for r in recs if r.function == fn]
    fail = run.failures.get(fn)
    if not calls and fail is None and fn in run.inline:
        return {"device": run.built.device, "path": "torch", "calls": 0,
                "implementation_called": f"inline torch code in {run.inline[fn]}",
                "note": "transformers stored no function for it, so the layer ran its own torch code"}
    if not calls and fail is None:
        return None
    ranges = [rs for tr in run.traces.values() for rs in tr.ranges if rs.function == fn]
    fwd = [rs for rs in ranges if not rs.backward]
    bwd = [rs for rs in ranges if rs.backward]
    impls = list(dict.fromkeys(r.implementation for r in calls))
    names: dict[str, int] = {}
    for rs in ranges:
        for k, v in rs.kernel_names.items():
            names[k] = names.get(k, 0) + v
    ev: dict[str, Any] = {
        "device": run.built.device,
        "implementation_called": impls[0] if len(impls) == 1 else impls,
        "path": "fast" if any(r.fast and not r.forced for r in calls) else "torch",
        "calls": len(calls),
        "calls_by_step": {s: sum(1 for r in recs if r.function == fn) for s, recs in run.records.items()
                          if any(r.function == fn for r in recs)},
        "cpu_ops": sum(rs.cpu_ops for rs in fwd),
        "gpu_kernels": sum(rs.kernels for rs in fwd),
        "backward_cpu_ops": sum(rs.cpu_ops for rs in bwd),
        "backward_gpu_kernels": sum(rs.kernels for rs in bwd),
        "cpu_ms": round(sum(rs.cpu_us for rs in ranges) / 1000, 3),
        "gpu_ms": round(sum(rs.gpu_us for rs in ranges) / 1000, 3),
        "kernel_names": [k for k, _ in sorted(names.items(), key=lambda kv: -kv[1])][:12],
        "fast_kernels_seen": evidence_mod.fast_kernel_names(
            run.package_of.get(fn, ""), [k for k, _ in sorted(names.items(), key=lambda kv: -kv[1])])[:12],
        "per_layer": [{"layer": rs.layer, "step": rs.step, "pass": "backward" if rs.backward else "forward",
                       "cpu_ops": rs.cpu_ops, "gpu_kernels": rs.kernels} for rs in ranges],
    }
    if any(r.forced for r in calls):
        ev["forced_torch"] = "the torch reference was forced for the rest of the run after the failure below"
    if fn in run.nonfinite:
        ev["nonfinite_output"] = True
    if fail is not None:
        ev["error"] = {"phase": fail.phase, "step": fail.step, "exception": fail.error,
                       "implementation": fail.implementation}
    if fn in run.direct:
        ev["vs_reference"] = run.direct[fn]
    if fn in run.isolated:
        ev["alone_on_fast_path_vs_reference"] = run.isolated[fn]
    return ev


def _rule_fix(report: Report, fn: str) -> tuple[str | None, str | None]:
    """(rule id, fix) of a known breakage that names `fn`, from the static rule evaluation."""
    for fd in report.findings:
        if fn in fd.functions and fd.severity == "broken":
            return fd.id, fd.fix
    return None, None


_UNKNOWN_FIX = ("not a known breakage: reinstall {dist} for this torch/CUDA (kernelcheck install --model {model}); "
                "until then `pip uninstall {dist}` gives the slow but working torch path")


def _broken_reason(fn: str, ev: dict[str, Any], run: LiveRun) -> str | None:
    """Why the observed run shows `fn` broken (exception, NaN, mismatch), or None."""
    err = ev.get("error")
    direct = ev.get("vs_reference") or {}
    impl = ev.get("implementation_called")
    if err:
        reason = (f"observed: {err['implementation']} raised in the {err['phase']} of the {err['step']} step: "
                  f"{err['exception']}")
        if err["phase"] == "backward" and ev.get("path") == "fast":
            reason += " (its forward ran the fast path correctly; training fails at the first backward)"
        return reason
    if ev.get("nonfinite_output") or direct.get("nonfinite"):
        return f"observed: {impl} returned NaN/Inf"
    if direct.get("compared") and not direct.get("ok"):
        return (f"observed: {impl} disagrees with the torch reference on the same inputs "
                f"(relative error {direct.get('rel_err')} > {direct.get('tolerance')})")
    iso = run.isolated.get(fn)
    if iso and iso.get("ok") is False:
        bad = [f"{s} {k} rel_err {v[k]['rel_err']}" for s, v in iso.items() if isinstance(v, dict)
               for k in ("logits", "grads") if k in v and not v[k]["ok"]]
        return (f"observed: with only {fn} on its bound path ({impl}), the model's results disagree with the torch "
                f"reference ({'; '.join(bad)}; tolerance {iso['tolerance']})")
    if direct.get("error") and ev.get("path") == "fast":
        return f"observed: calling {fn} again on the captured inputs raised {direct['error']}"
    return None


def _observed_status(report: Report, fs: FunctionStatus, ev: dict[str, Any], run: LiveRun) -> None:
    broken = _broken_reason(fs.name, ev, run)
    if broken:
        rid, fix = _rule_fix(report, fs.name)
        fs.status, fs.reason = "broken", broken + (f" [known breakage {rid}]" if rid else "")
        fs.fix = fix or _UNKNOWN_FIX.format(dist=fs.package, model=report.model.get("query") if report.model else "M")
        return
    if ev.get("path") == "fast" and ev.get("calls"):
        fs.status, fs.reason, fs.fix = "fast", None, None
        fs.implementation = ev["implementation_called"] if isinstance(ev["implementation_called"], str) else fs.implementation
        return
    # the torch reference ran
    if fs.status == "fast":
        fs.status = "fallback"
        fs.reason = (f"observed: the torch reference {ev['implementation_called']} ran although transformers bound "
                     "the fast kernel")
    elif fs.reason and not fs.reason.startswith("observed"):
        fs.reason = f"observed: the torch reference ran ({ev['implementation_called']}); {fs.reason}"


def _model_findings(run: LiveRun, report: Report) -> list[Finding]:
    out: list[Finding] = []
    if run.step_error:
        if run.step_error_fast:
            # a fast kernel ran before the failure: it may have left bad state (or the failure is real)
            out.append(Finding("verify-step-failed", "broken",
                               f"the model's {run.built.shape} step failed outside the fast functions after fast "
                               f"kernels ran: {run.step_error}",
                               "rerun with KERNELCHECK_DEBUG=1; check attn_implementation and the transformers version"))
        else:
            # only torch code ran: the shrunk model itself does not work, which says nothing about the kernels
            out.append(Finding("verify-incomplete", "warning",
                               f"the {run.built.shape} {run.built.model_type} model built from the shrunk config failed "
                               f"in torch code, before any fast kernel ran, so nothing was verified: {run.step_error}",
                               "adjust this family's entry in matrix/verify.toml [tiny] (shape relations), or use "
                               "--shape full on a GPU"))
    mc = run.model_compare
    if mc.get("ok") is False:
        bad = [f"{s} {k} rel_err {v[k]['rel_err']}" for s, v in mc.items() if isinstance(v, dict)
               for k in ("logits", "grads") if k in v and not v[k]["ok"]]
        fast_fns = sorted({r.function for recs in run.records.values() for r in recs if r.fast and not r.forced})
        out.append(Finding("verify-mismatch", "broken",
                           f"the fast path's results disagree with the torch reference on the same weights and inputs "
                           f"({'; '.join(bad)}; tolerance {mc['tolerance']}). Functions on the fast path: "
                           f"{', '.join(fast_fns)}.", None, None, tuple(fast_fns)))
    return out


def _timed_words(d: dict[str, Any]) -> str:
    return f"{d['ms']} ms, {d['kernels']} kernels, {d['cpu_ops']} CPU ops" if "ms" in d else f"failed: {d.get('error')}"


def _lines(run: LiveRun, report: Report) -> list[str]:
    b = run.built
    lines = [f"built {b.model_class} ({b.shape}: {len(b.layer_types)} layers {', '.join(b.layer_types)}; "
             f"{b.parameters / 1e6:.2f} M parameters, {b.dtype}) on {b.device}; {run.tokens} tokens, batch 1"]
    for name, tr in run.traces.items():
        lines.append(evidence_mod.launch_sentence(tr, b.device))
    tc = run.triton
    if tc:
        lines.append(f"Triton cache {tc['cache_dir']}: {tc['entries_before']} -> {tc['entries_after']} entries"
                     + (" (cold: first-call compile dominated the time)" if tc.get("cold") else ""))
    mc = run.model_compare
    if mc.get("skipped"):
        lines.append(f"reference comparison: {mc['skipped']}")
    elif "tolerance" in mc:
        parts = []
        for s, v in mc.items():
            if isinstance(v, dict):
                parts.append(f"{s} logits rel_err {v['logits']['rel_err']}"
                             + (f", grads rel_err {v['grads']['rel_err']}" if "grads" in v else ""))
        lines.append(f"vs torch reference (tolerance {mc['tolerance']}): " + "; ".join(parts)
                     + (" - OK" if mc.get("ok") else " - MISMATCH"))
    elif mc.get("error"):
        lines.append(f"reference comparison: {mc['error']}")
    bm = run.benchmark
    if bm and "skipped" in bm:
        lines.append(f"benchmark: {bm['skipped']}")
    elif bm:
        for pname, res in bm["passes"].items():
            f, r = res.get("fast", {}), res.get("reference", {})
            lines.append(f"benchmark {bm['layer']} {pname} on {bm['tokens']} tokens: bound path {_timed_words(f)}; "
                         f"torch reference {_timed_words(r)}")
            if "speedup" in res:
                kr = f", {res['kernel_ratio']}x fewer kernels" if res.get("kernel_ratio") else ""
                lines.append(f"  -> bound path {res['speedup']}x faster{kr}")
            if f.get("gpu_busy_fraction") is not None and r.get("gpu_busy_fraction") is not None:
                lines.append(f"  GPU busy {f['gpu_busy_fraction']:.0%} on the bound path, {r['gpu_busy_fraction']:.0%} on "
                             "the torch reference" + (" (launch-bound)" if r.get("launch_bound") else ""))
            if res.get("note"):
                lines.append(f"  note: {res['note']}")
        if not b.device.startswith("cuda"):
            lines.append("  note: no GPU here, both paths are the torch reference: the ratio measures nothing")
    t = run.timing
    lines.append("time: " + ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in t.items()))
    return lines


def verify(query: str, mode: str = "train", shape: str = "tiny", benchmark: bool = False,
           tokens: int | None = None, command: str = "verify") -> Report:
    """`kernelcheck verify`: the doctor's static report plus what running the real layers showed."""
    from kernelcheck.doctor.run import doctor as run_doctor

    if shape not in SHAPES:
        raise BadInput(f"--shape must be tiny or full, not '{shape}'.")
    if tokens is not None and tokens < 1:
        raise BadInput(f"--tokens must be a positive number of tokens, not {tokens}.")
    t0 = time.perf_counter()
    report = run_doctor(query, mode, exact=True)  # verify imports the modeling module anyway
    report.command = command
    _add_live(report, query, mode, shape, benchmark, tokens, t0)
    return report


def _add_live(report: Report, query: str, mode: str, shape: str, benchmark: bool, tokens: int | None,
              t0: float) -> None:
    model = models_mod.resolve(query)
    result = bindings_mod.bind(model.spec.module, model.spec.functions, exact=True)  # the live closures
    static_s = round(time.perf_counter() - t0, 3)
    if result.module_error:
        report.findings.append(Finding("verify-not-run", "broken", "verify could not build the model: the modeling "
                                       f"module does not import ({result.module_error})."))
        report.extra["live"] = {"ran": False, "lines": ["not run: the modeling module does not import"]}
        return
    needs = models_mod.needs(model, tuple(result.bindings) if result.bindings else None)
    run = run_live(model, result, needs, mode, shape, tokens, benchmark)
    run.timing = {"static_s": static_s, **run.timing}
    total = time.perf_counter() - t0
    run.timing["total_s"] = round(total, 3)
    run.timing["excluding_import_s"] = round(total - static_s, 3)
    for fs in report.functions:
        ev = function_evidence(run, fs.name)
        if ev is None:
            if fs.used and not fs.name.startswith("attention:") and fs.status != "unsupported":
                fs.evidence = {"calls": 0, "note": "not called in this run: none of the built layers "
                               f"({', '.join(dict.fromkeys(run.built.layer_types))}) calls it"}
            continue
        fs.evidence = ev
        _observed_status(report, fs, ev, run)
    report.findings.extend(_model_findings(run, report))
    fast = [f.name for f in report.functions if f.evidence and f.evidence.get("path") == "fast"]
    if not run.built.device.startswith("cuda"):
        report.findings.append(Finding(
            "verify-cpu", "info",
            "no CUDA GPU here: the layers ran on the CPU, where every fast function runs its torch reference (or is "
            "unsupported). The evidence shows the torch path; run verify on the GPU machine to prove the fast path."))
    report.extra["live"] = {
        "ran": True,
        "device": run.built.device,
        "dtype": run.built.dtype,
        "shape": shape,
        "tokens": run.tokens,
        "model": run.built.to_json(),
        "fast_functions": fast,
        "forced_torch_after_failure": sorted(run.forced),
        "steps": {n: _step_json(tr, run.built.device) for n, tr in run.traces.items()},
        "reference_comparison": run.model_compare,
        "benchmark": run.benchmark,
        "triton_cache": run.triton,
        "timing": run.timing,
        "lines": _lines(run, report),
    }


def _step_json(tr: evidence_mod.StepTrace, device: str) -> dict[str, Any]:
    d = tr.stats.to_json()
    d.update({"launch_bound": tr.launch_bound, "launch_bound_sentence": evidence_mod.launch_sentence(tr, device),
              "fast_packages": list(tr.fast_packages), "fallback_signatures": list(tr.fallbacks)})
    return d


def merge_into(report: Report, model_query: str, mode: str, shape: str = "tiny") -> None:
    """`doctor --live`: add verify's per-function evidence and observed statuses to a doctor report."""
    t0 = time.perf_counter()
    _add_live(report, model_query, mode, shape, False, None, t0)
