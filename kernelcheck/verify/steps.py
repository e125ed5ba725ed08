"""The state of one live verify run and the real steps it runs (train, prefill, cached decode)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcheck.core import matrix
from kernelcheck.core.errors import BackwardFailed, KernelcheckError
from kernelcheck.core.status import Mode
from kernelcheck.report.live_details import Benchmark
from kernelcheck.report.progress import working
from kernelcheck.verify import evidence, layers, noise
from kernelcheck.verify.instrument import CallRecord, Instrument
from kernelcheck.verify.live_evidence import DirectComparison

SHAPES = ("tiny", "full")


def say(msg: str) -> None:
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


def ticker(what: str, cache: Path) -> AbstractContextManager[None]:
    """Progress while a slow first call runs (report/progress.py): what is compiling, the seconds elapsed and the
    Triton cache entries compiled so far."""
    start = cache_entries(cache)
    return working(f"kernelcheck verify: {what}", every=15.0,
                   detail=lambda: f"Triton cache {cache}: {cache_entries(cache) - start:+d} entries so far")


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

    built: layers.BuiltModel
    tokens: int
    mode: str
    records: dict[str, list[CallRecord]] = field(default_factory=dict)  # step -> calls in the profiled pass
    traces: dict[str, evidence.StepTrace] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)
    forced: set[str] = field(default_factory=set)
    step_error: str | None = None  # the step failed outside any instrumented function
    step_error_fast: bool = False  # ... after a fast kernel had run in that attempt
    nonfinite: set[str] = field(default_factory=set)  # functions that made NaN/Inf from finite inputs
    direct: dict[str, DirectComparison] = field(default_factory=dict)  # per-function fast vs reference
    model_compare: dict[str, Any] = field(default_factory=dict)
    isolated: dict[str, dict[str, Any]] = field(default_factory=dict)  # fn alone on the fast path vs reference
    benchmark: Benchmark | None = None  # verify/bench.run_benchmark's; None: no --benchmark
    timing: dict[str, float] = field(default_factory=dict)  # the phases' seconds as they end (report: Timing)
    package_of: dict[str, str] = field(default_factory=dict)  # function -> package import name
    inline: dict[str, str] = field(default_factory=dict)  # old regime: function -> the layer code that inlines it
    triton: dict[str, Any] = field(default_factory=dict)


class Steps:
    """The real steps: train (forward + backward), prefill with cache, one cached decode step."""

    def __init__(self, built: layers.BuiltModel, inst: Instrument, mode: str, tokens: int, verbose: bool = False):
        """`verbose` (--verbose): third-party output of the runs is left visible, not captured."""
        import torch

        self.torch = torch
        self.built, self.inst, self.mode, self.verbose = built, inst, mode, verbose
        g = torch.Generator().manual_seed(1234)
        vocab = int(built.model.config.vocab_size)
        self.ids = torch.randint(0, vocab, (1, tokens), generator=g).to(built.device)
        self.next_id = torch.randint(0, vocab, (1, 1), generator=g).to(built.device)
        self.cache: Any = None
        self.names = ["train", "prefill", "decode"] if mode == Mode.TRAIN else ["prefill", "decode"]

    def sync(self) -> None:
        if self.built.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def run(self, name: str) -> dict[str, Any]:
        self.inst.step = name
        result: dict[str, Any] = getattr(self, "_" + name)()  # _train, _prefill or _decode
        return result

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
                    raise BackwardFailed(exc) from exc
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


def run_all(steps: Steps) -> dict[str, dict[str, Any]]:
    return {name: steps.run(name) for name in steps.names}




def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:400] if text else ""


CAPTURED: list[str] = []  # third-party output kept out of the user's terminal (KERNELCHECK_VERBOSE=1 shows it)


def run_profiled(steps: Steps, name: str, fn: Callable[[], Any], device: str, *,
                 m: matrix.Matrix) -> tuple[Any, evidence.StepTrace]:
    """Run `fn` under torch.profiler (CPU, plus CUDA on a GPU) and attribute its trace (read on the matrix `m`)."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        acts.append(ProfilerActivity.CUDA)
    steps.inst.profiling = True
    try:
        # the profiler's C++ side prints `USDT ... profiler_start/stop` on fd 2: keep it in the log
        with noise.captured(steps.verbose) as got, \
                profile(activities=acts, record_shapes=False) as prof:
            result = fn()
    finally:
        steps.inst.profiling = False
    CAPTURED.extend(got)
    with tempfile.TemporaryDirectory(prefix="kernelcheck-trace-") as tmp:
        path = Path(tmp) / f"{name}.json"
        prof.export_chrome_trace(str(path))
        events, meta = evidence.load_events(path)
    return result, evidence.analyze(name, events, meta, m=m)
