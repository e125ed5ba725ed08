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


def check(req: Request, ctx: Context) -> None:
    """Every usage rule of verify, found before anything runs: a flag the chosen kind of run (per function, --step,
    --packing) would ignore, the packing batch's sources, the model, and the paths the run reads or writes."""
    from kernelcheck.commands import usage
    from kernelcheck.verify import record

    _check_flags(req)
    _check_batch(req)
    for flag, value, least in (("--tokens", req.tokens, "a positive number of tokens"),
                               ("--layers", req.layers, "at least 1")):
        if value is not None and value < 1:
            raise BadInput(f"{flag} must be {least}, not {value}.")
    usage.mode(req.mode)
    usage.choice("--shape", req.shape, ("tiny", "full"))
    if req.packing not in (None, "all"):
        from kernelcheck.packing import decide

        decide.check_mode(req.packing, decide.load_facts(m=ctx.matrix))  # as doctor --packing MODE
    usage.model(req.model, ctx.matrix)
    record.check_path(req.record)
    if req.trace_dir is not None:
        usage.writable_folder(req.trace_dir, "--trace-dir", "the step traces")
    if req.cache_dir is not None:
        from kernelcheck.doctor import cacheproof

        cacheproof.read(req.cache_dir)  # a folder warm did not write: exit 2 before anything runs


def _check_flags(req: Request) -> None:
    """A flag the chosen kind of run (per function, --step, --packing) would ignore is refused, never dropped."""
    from kernelcheck.commands import usage

    if req.packing:
        for flag, given in (("--step", req.step), ("--shape full", req.shape == "full"),
                            ("--tokens", req.tokens is not None)):
            if given:
                raise BadInput(f"{flag} does not apply with --packing: --packing runs two short sequences packed "
                               "and alone on the tiny shape, at its own lengths. Run them as two commands; nothing "
                               "was run.")
    if not req.step:
        shapes = "it shapes the whole-training-step measurement, which runs only then."
        for flag, given, why in (
                ("--layers", req.layers is not None, shapes), ("--trace-dir", req.trace_dir is not None, shapes),
                ("--no-checkpointing" if req.checkpointing is False else "--checkpointing",
                 req.checkpointing is not None, shapes),
                ("--budget", req.budget, "it budgets the whole step's GPU time by op class (for a trace of your "
                                         "own: kernelcheck trace FILE --budget --model M --tokens N)."),
                ("--record", req.record is not None, "it appends the step's measurement.")):
            if given:
                usage.refuse(flag, "--step", why)
    elif req.benchmark:
        raise BadInput("--benchmark does not apply with --step: --step times whole training steps of both paths "
                       "already; --benchmark times single layers without --step. Nothing was run.")
    elif req.mode != Mode.TRAIN:
        raise BadInput("--step measures a training step (forward, loss, backward, AdamW): use --mode train.")
    if req.compile_check and (req.step or req.packing):
        raise BadInput("--compile runs the model's layers under torch.compile next to verify's per-function run; it "
                       "does not apply with --step or --packing. Run them as two commands; nothing was run.")


def _check_batch(req: Request) -> None:
    """--batch, --collator and --lengths belong to --packing; --collator needs --lengths; one batch source; a packing
    MODE (what transformers' collator passes) is not judged on the job's own batch or the payoff. An empty value is
    refused (not read as "not given")."""
    from kernelcheck.commands import usage

    sources = (("--batch", req.batch), ("--collator", req.collator), ("--lengths", req.lengths))
    for flag, given in sources:
        if given is not None and not given.strip():
            raise BadInput(f"{flag} is empty: give {'MODULE:CALLABLE' if flag == '--collator' else 'a file path'} "
                           "(an unset shell variable?). Nothing was run.")
    if req.packing not in (None, "all") and (req.batch or req.collator or req.benchmark):
        raise BadInput(f"--packing {req.packing} judges transformers' own collator in that mode; the job's batch "
                       "(--batch, --collator) says itself what it passes, and --benchmark times the recommended one. "
                       f"Drop {req.packing} (--packing alone); nothing was run.")
    for flag, given in sources:
        if given and not req.packing:
            usage.refuse(flag, "--packing", "it gives the packed batch (or the lengths) that --packing checks.")
    if req.batch and req.collator:
        raise BadInput("--batch and --collator are two sources of the same batch: give one. Nothing was run.")
    if req.collator and not req.lengths:
        raise BadInput("--collator needs --lengths FILE: the lengths of the examples the collator packs into one "
                       "batch. Nothing was run.")


def run(req: Request, ctx: Context) -> Outcome[Report] | Outcome[PackingRun] | Outcome[BatchRun]:
    check(req, ctx)
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
