"""`kernelcheck padding`: the padding a batching rule costs on the job's data, and the packing bound."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kernelcheck import SCHEMA
from kernelcheck.cli.common import emit, guarded
from kernelcheck.core.errors import BadInput


@click.command("padding")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--batching", default="budget:8192", show_default=True,
              help="budget:TOKENS (pad to longest under a token budget), batch:SIZE (fixed batch size, padded "
                   "to longest) or packing:TOKENS (padding-free rows).")
@click.option("--tokenizer", default=None, type=click.Path(file_okay=False),
              help="Local tokenizer folder, for data with a text column instead of input_ids.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False),
              help="Write an SVG histogram of lengths with the padding marked.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.report/1) on stdout.")
@guarded("padding")
def padding(data: str, batching: str, tokenizer: str | None, plot: str | None, as_json: bool) -> int:
    """How much of each step is padding under BATCHING, and how much packing could save.

    DATA: a JSONL, Parquet or Arrow file with input_ids (or a length column, or a text column with
    --tokenizer), or a text file with one length per line. Streams with bounded memory.
    """
    from kernelcheck.padding import batching as batching_mod
    from kernelcheck.padding import lengths, svg, waste

    rule = waste.Rule.parse(batching)
    result = batching_mod.measure(lengths.chunks(data, tokenizer), rule)
    if plot:
        try:
            Path(plot).write_text(svg.render(result, f"{Path(data).name}: lengths and padding under {rule}"))
        except OSError as exc:
            raise BadInput(f"cannot write --plot {plot}: {exc.strerror}. Give a writable path.") from None
    if as_json:
        emit(json.dumps({"schema": SCHEMA, "command": "padding", "verdict": "ready", "exit_code": 0,
                         "data": data, "padding": waste.as_dict(result), "plot": plot}, indent=2), is_json=True)
    else:
        emit(waste.render_text(result, data))
    return 0
