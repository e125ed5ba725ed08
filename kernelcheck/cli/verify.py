"""`kernelcheck verify`: run the model's real layers under the profiler."""

from __future__ import annotations

import click

from kernelcheck.cli.common import MODEL_HELP, context, emit, finish, guarded, mode_option, output_options
from kernelcheck.cli.complete import complete_model
from kernelcheck.cli.fleet import all_ranks_options
from kernelcheck.cli.outfile import check_writable, output_file_option
from kernelcheck.core.errors import BadInput
from kernelcheck.report.model import Report


@click.command()
@click.option("--model", "-m", "model", shell_complete=complete_model, required=True, help=MODEL_HELP)
@click.option("--shape", type=click.Choice(["tiny", "full"]), default=None,
              help="tiny: a few small layers, the same code path (seconds, CPU or GPU). full: one real-size layer "
                   "of each type (GPU only). Default: tiny; with --step full on a GPU, tiny without one.")
@mode_option
@click.option("--benchmark", is_flag=True,
              help="Also time the model's kernel-calling layer on the bound path and on the forced torch reference.")
@click.option("--tokens", type=int, default=None,
              help="Prefill length (batch 1). Default: 128 for tiny, 8192 for full (matrix/verify.toml).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.verify/1) on stdout.")
@click.option("--compile", "compile_check", is_flag=True,
              help="Also run the model's layers under torch.compile (infer and train): graph breaks with where and "
                   "why, which parts ran compiled or eagerly, compiled vs eager time, and the fix "
                   "(see docs/verify.md).")
@click.option("--cache-dir", "cache_dir", default=None, type=click.Path(file_okay=False),
              help="A JIT cache folder `kernelcheck warm` baked: before the run, say per JIT whether this node would "
                   "hit it and what a miss costs (its manifest's keys); the run's cache line then measures it.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Also write a JUnit XML file: one test case per function, for CI dashboards.")
@click.option("--step", is_flag=True,
              help="Measure a whole training step (forward, loss, backward, AdamW) of a shortened model with the "
                   "real widths and vocabulary, bound kernels vs the forced torch reference (each in its own "
                   "process), and project it to the real layer count (see docs/verify.md).")
@click.option("--layers", type=int, default=None,
              help="With --step: how many decoder layers to build (default: one period of the layer pattern).")
@click.option("--checkpointing/--no-checkpointing", default=None,
              help="With --step: activation checkpointing (default on, like the training jobs it gates).")
@click.option("--trace-dir", type=click.Path(file_okay=False), default=None,
              help="With --step: keep the whole-step traces (step-fast.json.gz, step-reference.json.gz) here.")
@click.option("--budget", "budget", is_flag=True,
              help="With --step: each path's profiled step by op class (GEMM, attention, GDN core, norms, ...) "
                   "against its floor at the GPU's peaks, the MFU, the causes with their fixes (docs/verify.md).")
@click.option("--budget-svg", "budget_svg", type=click.Path(dir_okay=False), default=None, metavar="OUT.svg",
              help="With --step --budget: write the bound path's picture (measured vs floor per class).")
@click.option("--record", "record", type=click.Path(dir_okay=False), default=None,
              help="With --step: append the measurement (both paths, projected tokens/s, versions) as one JSON "
                   "line to FILE; doctor then puts a FALLBACK in GPU-hours from it (KERNELCHECK_MEASUREMENTS=FILE).")
@click.option("--packing", "packing", is_flag=False, flag_value="all", default=None, metavar="[MODE]",
              type=click.Choice(["all", "none", "position_ids", "cu_seq_lens", "flash"]),
              help="Instead: pack two sequences with DataCollatorWithFlattening in each mode (position_ids, "
                   "cu_seq_lens, flash) at short, chunk-size and long lengths, compare them with each run alone "
                   "per layer type, beside doctor's decision. MODE: the job's mode, judged as `doctor --packing "
                   "MODE` judges it (default: flash, the recommended one). See docs/packing.md.")
@click.option("--batch", "batch", type=click.Path(dir_okay=False), default=None,
              help="With --packing: check one real batch as the job's collator yields it (a torch.save'd dict of "
                   "tensors, or .safetensors): lint its metadata, record which packing keys reach each kernel, and "
                   "compare each segment packed vs alone, forward and backward.")
@click.option("--collator", "collator", default=None, metavar="MODULE:CALLABLE",
              help="With --packing --lengths: build that batch with the job's own collator instead of a file.")
@click.option("--lengths", "lengths", type=click.Path(dir_okay=False), default=None,
              help="With --packing: the example lengths (as the padding command reads them) for --collator and "
                   "for --benchmark (padded vs packed training step; default: a long-tailed mix).")
@output_options
@output_file_option
@guarded("verify")
@all_ranks_options("verify")
def verify(model: str, shape: str | None, mode: str, benchmark: bool, tokens: int | None, as_json: bool,
           junit: str | None, step: bool = False, layers: int | None = None, checkpointing: bool | None = None,
           trace_dir: str | None = None, packing: str | None = None, record: str | None = None,
           batch: str | None = None, collator: str | None = None, lengths: str | None = None,
           compile_check: bool = False, cache_dir: str | None = None, budget: bool = False,
           budget_svg: str | None = None) -> int:
    """Run MODEL's real layers here under the profiler and prove which implementation ran.

    Builds the model's own transformers layers from its config with random weights (no weight
    download), runs a training step (train mode) and a prefill plus one cached decode step on the local
    device (CUDA if present, else CPU), and reports for each fast function the implementation really
    called, the GPU kernels and CPU ops it caused per layer, its error against the torch reference on
    the same inputs, and a status: fast, fallback, broken (exception, refusal, NaN, mismatch) or
    unsupported. Progress goes to stderr; the first run on a GPU compiles Triton kernels (minutes with
    a cold cache: see docs/verify.md to warm it into an image).

    \b
    Examples:
      kernelcheck verify --model qwen3.8-27b                      # tiny shape, train mode
      kernelcheck verify --model qwen3.8-27b --mode infer --json
      kernelcheck verify --model qwen3.8-27b --shape full --benchmark --tokens 8192 --mode infer
      kernelcheck verify --model qwen3.8-27b --step --tokens 8192  # a whole step, projected
      kernelcheck verify --model qwen3.8-27b --packing --batch batch.pt  # the job's own packed batch
    """
    from kernelcheck.cli import outfile
    from kernelcheck.commands import verify as command

    xml = junit or (outfile.path() if (outfile.path() or "").endswith(".xml") else None)
    if packing and xml:
        raise BadInput(f"{'--junit' if junit else '-o'} {xml}: --packing writes no JUnit report (it has no "
                       "per-function test cases); use -o FILE.json (or --json) for its report. Nothing was run.")
    req = command.Request(model=model, mode=mode, shape=shape, benchmark=benchmark, tokens=tokens, step=step,
                          layers=layers, checkpointing=checkpointing, trace_dir=trace_dir, record=record,
                          packing=packing, batch=batch, collator=collator, lengths=lengths,
                          compile_check=compile_check, cache_dir=cache_dir, budget=budget)
    if budget_svg is not None and not budget:
        raise BadInput("--budget-svg writes the budget's picture: add --step --budget.")
    check_writable(budget_svg, "--budget-svg", "budget picture", "budget.svg")
    outcome = command.run(req, context())
    if isinstance(outcome.report, Report):
        if budget_svg is not None and outcome.report.budget is not None:
            from kernelcheck.budget import render as budget_render
            from kernelcheck.cli.trace import write_svg

            paths = outcome.report.budget.paths
            write_svg(budget_svg, budget_render.svg(paths.get("fast") or next(iter(paths.values()))))
        return finish(outcome.report, as_json, junit)
    outfile.write(outcome.report.render(True))  # -o FILE: the packing report's JSON, as --json prints it
    emit(outcome.report.render(as_json), is_json=as_json)  # the real stdout back (cli/stdout_fd.py); text wrapped
    return outcome.exit_code
