"""`kernelcheck models`: the models, aliases and functions the matrix knows (commands/models.py), printed."""

from __future__ import annotations

import click

from kernelcheck.cli import outfile
from kernelcheck.cli.common import context, emit, guarded, output_options
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.core import jsonout


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.models/1) on stdout.")
@output_options
@output_file_option
@guarded("models")
def models(as_json: bool) -> int:
    """List the models kernelcheck knows: aliases, model types and the fast functions each needs.

    Each alias (what --model takes besides a Hub id or a folder) with its Hub id and model_type; each
    model_type by family, as the installed transformers builds it, with the fast functions the family
    calls. Any other model_type the installed transformers knows is checked by asking its modeling module.

    \b
    Examples:
      kernelcheck models
      kernelcheck models --json | jq '.model_types[] | select(.family == "mamba2") | .model_type'
      python -c 'import kernelcheck; print([t.model_type for t in kernelcheck.models().model_types])'
    """
    from kernelcheck.commands import models as command

    listing = command.run(command.Request(), context()).report
    data = jsonout.dumps(listing.to_json(), indent=2)
    outfile.write(data)  # -o FILE
    if as_json:
        emit(data, is_json=True)
        return 0
    lines = ["aliases", *(f"  {a.alias:<22} {a.id:<42} {a.model_type}" for a in listing.aliases),
             "model types (by family)"]
    for fam in listing.families:
        lines += [f"  {fam.name}: {fam.title}", f"    functions: {', '.join(fam.functions)}",
                  f"    model_type: {', '.join(t.model_type for t in listing.model_types if t.family == fam.name)}"]
    # the last line is what --quiet prints: the count, and what happens to a model not listed
    lines.append(f"{len(listing.aliases)} aliases, {len(listing.model_types)} model types; any other model_type the "
                 "installed transformers knows is checked by asking its modeling module.")
    emit("\n".join(lines))  # wrapped to the terminal or 100 columns piped, as every report
    return 0
