"""`kernelcheck verify` (and `kernelcheck.verify_model()`): the real layers run under the profiler, assembled once.

Three runs, one request: the layers (verify/run.py) or the whole step (verify/step.py, with --record's line), each
with a FALLBACK's cost in GPU-hours as doctor adds it; or --packing's measurement (verify/packing_report.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome, reported
from kernelcheck.core.status import Mode

if TYPE_CHECKING:
    from kernelcheck.report.model import Report
    from kernelcheck.verify.packing_batch_report import BatchRun
    from kernelcheck.verify.packing_report import PackingRun


@dataclass(frozen=True)
class Request:
    """verify's options. `packing`: "all" measures every mode (`--packing` alone), a mode judges that one."""

    model: str
    mode: str = Mode.TRAIN
    shape: str | None = None
    benchmark: bool = False
    tokens: int | None = None
    step: bool = False
    layers: int | None = None
    checkpointing: bool | None = None
    trace_dir: str | None = None
    record: str | None = None
    packing: str | None = None
    batch: str | None = None  # --batch FILE: the job's own batch (torch.save'd dict or .safetensors)
    collator: str | None = None  # --collator module:callable, with --lengths FILE
    lengths: str | None = None
    compile_check: bool = False  # --compile: the layers under torch.compile too (graph breaks, compiled or eager)
    cache_dir: str | None = None  # --cache-dir: the cache proof for a folder `kernelcheck warm` baked, before the run
    budget: bool = False  # --budget (with --step): each path's step by op class against its floor


def check(req: Request) -> None:
    """Usage errors, found before anything runs."""
    from kernelcheck.verify import record

    if req.budget and not req.step:
        raise BadInput("--budget only applies with --step: it budgets the whole step's GPU time by op class "
                       "(for a trace of your own: kernelcheck trace FILE --budget --model M --tokens N).")
    if req.record and not req.step:
        raise BadInput("--record only applies with --step: it appends the step's measurement.")
    if req.compile_check and (req.step or req.packing):
        raise BadInput("--compile runs the model's layers under torch.compile next to verify's per-function run; it "
                       "does not apply with --step or --packing. Run them as two commands; nothing was run.")
    record.check_path(req.record)
    if req.cache_dir is not None:
        from kernelcheck.doctor import cacheproof

        cacheproof.read(req.cache_dir)  # a folder warm did not write: exit 2 before anything runs


def run(req: Request, ctx: Context) -> Outcome[Report] | Outcome[PackingRun] | Outcome[BatchRun]:
    check(req)
    from kernelcheck.integrations import jit_caches

    if req.packing and (req.batch or req.collator or req.lengths or req.benchmark):
        from kernelcheck.verify import packing_batch_report

        # without --benchmark the check times nothing: one working config per autotuned kernel
        with jit_caches.first_config_only(not req.benchmark):
            ran = packing_batch_report.measure(req.model, req.batch, req.collator, req.lengths, req.benchmark,
                                               m=ctx.matrix)
        return Outcome(ran, ran.verdict)
    if req.packing:
        from kernelcheck.verify import packing_report

        with jit_caches.first_config_only():
            measured = packing_report.measure(req.model, None if req.packing == "all" else req.packing,
                                              m=ctx.matrix)
        return Outcome(measured, measured.verdict)
    if req.step:
        from kernelcheck.verify import record
        from kernelcheck.verify.step import verify_step

        report = verify_step(req.model, mode=req.mode, shape=req.shape, tokens=req.tokens, layers=req.layers,
                             checkpointing=req.checkpointing, trace_dir=req.trace_dir, verbose=ctx.verbose,
                             m=ctx.matrix, budget=req.budget)
        if req.record:
            record.append(report, req.record, req.model)
        return reported(report)
    from kernelcheck.doctor.cost import attach as attach_cost
    from kernelcheck.verify.run import verify

    report = verify(req.model, mode=req.mode, shape=req.shape or "tiny", benchmark=req.benchmark, tokens=req.tokens,
                    verbose=ctx.verbose, m=ctx.matrix, compile_check=req.compile_check, cache_dir=req.cache_dir)
    attach_cost(report, req.model, m=ctx.matrix)
    return reported(report)
