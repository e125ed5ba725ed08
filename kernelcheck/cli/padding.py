"""`kernelcheck padding`: the padding a batching rule costs on the job's data, and the packing bound."""

from __future__ import annotations

import click

from kernelcheck.cli import outfile
from kernelcheck.cli.common import context, emit, guarded, output_options
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.core import jsonout


@click.command("padding")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--batching", default="budget:8192", show_default=True,
              help="budget:TOKENS (pad to longest under a token budget), batch:SIZE (fixed batch size, padded "
                   "to longest) or packing:TOKENS (padding-free rows).")
@click.option("--tokenizer", default=None, type=click.Path(file_okay=False),
              help="Local tokenizer folder, for data with a text column instead of input_ids.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False), metavar="FILE.svg|FILE.png",
              help="Draw the histogram of example lengths (examples per length bin) above the tokens each bin "
                   "costs, padding in red, with the median, the budget and the lengths batches were padded to. "
                   "SVG; .png only where cairosvg or rsvg-convert is installed (else exit 2).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.padding/1) on stdout.")
@output_options
@output_file_option
@guarded("padding")
def padding(data: str, batching: str, tokenizer: str | None, plot: str | None, as_json: bool) -> int:
    """How much of each step is padding under BATCHING, and how much packing could save.

    DATA: a JSONL, Parquet or Arrow file with input_ids (or a length column, or a text column with
    --tokenizer), or a text file with one length per line. Streams with bounded memory.

    \b
    Examples:
      kernelcheck padding train.jsonl --batching budget:16384 --plot padding.svg
      kernelcheck padding lengths.txt --batching batch:8 --json
    """
    from kernelcheck.commands import padding as command

    outcome = command.run(command.Request(data, batching, tokenizer, plot), context())
    outfile.write(jsonout.dumps(outcome.report.to_json(), indent=2))  # -o FILE
    emit(outcome.report.render(as_json), is_json=as_json)
    return outcome.exit_code
