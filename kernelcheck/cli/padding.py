"""`kernelcheck padding`: the padding a batching rule costs on the job's data, and the packing bound."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kernelcheck import schemas
from kernelcheck.cli import outfile
from kernelcheck.cli.common import emit, guarded, output_options
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.core.status import Verdict


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
    from kernelcheck.padding import batching as batching_mod
    from kernelcheck.padding import lengths, svg, waste
    from kernelcheck.padding import plot as plot_mod

    rule = waste.Rule.parse(batching)
    if plot:
        plot_mod.check(plot)  # a .png nothing renders, or another suffix: exit 2 before the data is read
    result = batching_mod.measure(lengths.chunks(data, tokenizer), rule)  # vectorized, bounded memory
    drawn: dict[str, object] | None = None
    if plot:
        axis = svg.axis_for(result)
        how = plot_mod.write(plot, svg.render(result, f"{Path(data).name}: lengths and padding under {rule}"))
        drawn = {"file": plot, "format": "png" if how.startswith("PNG") else "svg", "bins": len(axis.edges) - 1,
                 "scale": "log" if axis.log else "linear", "how": how, "bin_text": axis.describe()}
    shown = {k: v for k, v in drawn.items() if k in ("file", "format", "bins", "scale")} if drawn else None
    report = json.dumps({"schema": schemas.schema_id("padding"), "command": "padding", "verdict": Verdict.READY,
                         "exit_code": 0, "data": data, "padding": waste.as_dict(result), "plot": shown}, indent=2)
    outfile.write(report)  # -o FILE
    if as_json:
        emit(report, is_json=True)
    else:
        emit(waste.render_text(result, data, drawn))
    return 0
