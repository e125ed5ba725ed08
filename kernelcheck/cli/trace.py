"""`kernelcheck trace`: read a torch profiler trace of a real step."""

from __future__ import annotations

import click

from kernelcheck.cli import outfile
from kernelcheck.cli.common import context, emit, guarded, output_options
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.report.model import render_json


@click.command()
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.trace/1) on stdout.")
@click.option("--annotate", "annotate", type=click.Path(dir_okay=False), default=None, metavar="OUT.json",
              help="Also write the trace back with kernelcheck's findings as instant events (open it in Perfetto "
                   "or chrome://tracing to see where the fallback ran); .gz compresses.")
@output_options
@output_file_option
@guarded("trace")
def trace(file: str, as_json: bool, annotate: str | None = None) -> int:
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

    Exit codes: 0 ready, 3 a fallback signature or a launch-bound step, 2 not a readable trace.
    """
    from kernelcheck.commands import trace as command
    from kernelcheck.trace.render import render_text

    report = command.run(command.Request(file, annotate), context()).report
    outfile.write(render_json(report))
    emit(render_json(report) if as_json else render_text(report), is_json=as_json)
    return report.exit_code
