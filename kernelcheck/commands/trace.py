"""`kernelcheck trace FILE` (and `kernelcheck.trace_report()`): a profiler trace read and judged, assembled once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome, reported

if TYPE_CHECKING:
    from kernelcheck.budget.build import ModelWork
    from kernelcheck.report.model import Report
    from kernelcheck.trace.results import TraceAnalysis


@dataclass(frozen=True)
class Request:
    """trace's options: the trace file (.json or .json.gz), --annotate's output file, and --budget with the model
    and tokens its floors are counted for (--model, --tokens, --checkpointing)."""

    file: str
    annotate: str | None = None
    budget: bool = False
    model: str | None = None
    tokens: int | None = None
    checkpointing: bool = False


def check(req: Request) -> None:
    """Bad usage before the file is read: the budget's options without --budget, --model without --tokens."""
    if not req.budget and (req.model is not None or req.tokens is not None):
        raise BadInput("--model and --tokens give a step budget its floors: add --budget (kernelcheck trace FILE "
                       "--budget --model M --tokens N).")
    if req.budget and req.model is not None and req.tokens is None:
        raise BadInput("--budget --model M needs --tokens N: the tokens of one profiled step (batch x sequence "
                       "length), which the floors and the MFU are counted for.")
    if req.tokens is not None and req.tokens < 1:
        raise BadInput(f"--tokens must be at least 1, not {req.tokens}.")


def run(req: Request, ctx: Context) -> Outcome[Report]:
    check(req)
    from kernelcheck.trace import analysis

    progress = analysis.progress_to_stderr if ctx.progress else None
    if not req.budget:
        return reported(analysis.trace_report(req.file, progress=progress, annotate=req.annotate, m=ctx.matrix))
    from kernelcheck.budget import run as budget_run
    from kernelcheck.report.budget import BudgetSection

    work = None
    if req.model is not None and req.tokens is not None:
        from kernelcheck.integrations import transformers_models
        from kernelcheck.verify import layers

        fields = layers.text_config(transformers_models.resolve(req.model, m=ctx.matrix))[1]
        query, tokens, ckpt = req.model, req.tokens, req.checkpointing

        def work(an: TraceAnalysis) -> ModelWork:
            return budget_run.model_work(query, fields, tokens, ckpt, an)

    an, budget = budget_run.trace_budget(req.file, m=ctx.matrix, progress=progress, work=work)
    report = analysis.trace_report(req.file, annotate=req.annotate, m=ctx.matrix, analysis=an)
    report.budget = BudgetSection({"trace": budget})
    return reported(report)
