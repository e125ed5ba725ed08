"""`kernelcheck trace FILE` (and `kernelcheck.trace_report()`): a profiler trace read and judged, assembled once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context
from kernelcheck.core.outcome import Outcome, reported

if TYPE_CHECKING:
    from kernelcheck.report.model import Report


@dataclass(frozen=True)
class Request:
    """trace's options: the trace file (.json or .json.gz) and --annotate's output file."""

    file: str
    annotate: str | None = None


def run(req: Request, ctx: Context) -> Outcome[Report]:
    from kernelcheck.trace import analysis

    progress = analysis.progress_to_stderr if ctx.progress else None
    return reported(analysis.trace_report(req.file, progress=progress, annotate=req.annotate, m=ctx.matrix))
