"""`kernelcheck trace`: read a torch profiler trace of a real step."""

from __future__ import annotations

import click

from kernelcheck.cli import outfile
from kernelcheck.cli.common import context, emit, guarded, output_options
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.core.errors import BadInput
from kernelcheck.report.model import render_json


def write_svg(path: str, svg: str) -> None:
    """Write the budget's picture; a path that cannot be written is bad input."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(svg)
    except OSError as exc:
        raise BadInput(f"cannot write the budget's picture to {path}: {exc.strerror}.") from None


@click.command()
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.trace/1) on stdout.")
@click.option("--annotate", "annotate", type=click.Path(dir_okay=False), default=None, metavar="OUT.json",
              help="Also write the trace back with kernelcheck's findings as instant events (open it in Perfetto "
                   "or chrome://tracing to see where the fallback ran); .gz compresses.")
@click.option("--budget", "budget", is_flag=True,
              help="Also a step budget: each step's GPU time by op class (GEMM, attention, GDN core, norms, ...) "
                   "against its floor at the GPU's peaks, the MFU, the causes with their fixes (docs/trace.md).")
@click.option("--model", "model", default=None, metavar="M",
              help="With --budget: the model the trace ran (alias, Hub id or folder), for the floors and MFU.")
@click.option("--tokens", "tokens", type=int, default=None, metavar="N",
              help="With --budget --model: the tokens of one profiled step (batch x sequence length).")
@click.option("--checkpointing", "checkpointing", is_flag=True,
              help="With --budget --model: the step recomputed its forward (activation checkpointing).")
@click.option("--budget-svg", "budget_svg", type=click.Path(dir_okay=False), default=None, metavar="OUT.svg",
              help="With --budget: write the picture (measured vs floor per class, stacked) of the first step.")
@output_options
@output_file_option
@guarded("trace")
def trace(file: str, as_json: bool, annotate: str | None = None, budget: bool = False, model: str | None = None,
          tokens: int | None = None, checkpointing: bool = False, budget_svg: str | None = None) -> int:
    """Diagnose a torch profiler trace (Chrome trace JSON, plain or .gz) of a real step.

    Per ProfilerStep: CPU ops, GPU kernels (memcpy/memset apart), CPU span, GPU busy time (union of
    kernel intervals), idle gaps, launch delays, top kernels; then whether the step carries the
    signature of transformers' torch reference path (thousands of small elementwise/triu/depthwise-conv
    kernels and no fla / causal-conv1d kernel: it names the missing package) or is launch-bound
    (nvidia-smi reads ~100% while the GPU waits for launches). Large traces are streamed.

    \b
    Record one (see docs/trace.md):
      with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
              schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
              on_trace_ready=lambda p: p.export_chrome_trace("step.json.gz")) as prof:
          for batch in loader: train_step(batch); prof.step()

    \b
    Examples:
      kernelcheck trace step.json.gz
      kernelcheck trace rank0.pt.trace.json --json | jq .summary
      kernelcheck trace step.json.gz --budget --model qwen3.8-27b --tokens 8192

    Exit codes: 0 ready, 3 a fallback signature or a launch-bound step, 2 not a readable trace.
    """
    from kernelcheck.commands import trace as command
    from kernelcheck.trace.render import render_text

    if budget_svg is not None and not budget:
        raise BadInput("--budget-svg writes the budget's picture: add --budget.")
    req = command.Request(file, annotate, budget, model, tokens, checkpointing)
    report = command.run(req, context()).report
    outfile.write(render_json(report))
    text = render_text(report)
    if report.budget is not None:
        from kernelcheck.budget import render as budget_render
        from kernelcheck.report import budget as budget_text

        b = report.budget.paths["trace"]
        text += "\n\n" + "\n".join(budget_text.text(b))
        if budget_svg is not None:
            write_svg(budget_svg, budget_render.svg(b))
    emit(render_json(report) if as_json else text, is_json=as_json)
    return report.exit_code
