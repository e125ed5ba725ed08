"""`kernelcheck models`: the models, aliases and functions the matrix knows."""

from __future__ import annotations

import json

import click

from kernelcheck import schemas
from kernelcheck.cli import outfile
from kernelcheck.cli.common import context, emit, guarded, output_options
from kernelcheck.cli.outfile import output_file_option


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
@output_options
@output_file_option
@guarded("models")
def models(as_json: bool) -> int:
    """List the models kernelcheck knows: aliases, model types and the fast functions each needs."""
    from kernelcheck.integrations.transformers_models import installed_version

    m = context().matrix
    at = {n: t.at(installed_version()) for n, t in m.model_types.items()}  # as the installed transformers builds
    data = json.dumps({
        "schema": schemas.schema_id("models"), "command": "models",
        "aliases": [{"alias": a.name, "id": a.id, "model_type": a.model_type or
                     m.shipped_config(a.config)["model_type"]} for a in m.aliases.values()],
        "model_types": [{"model_type": t.name, "family": t.family, "functions": list(t.functions)}
                        for t in at.values()],
    }, indent=2)
    outfile.write(data)  # -o FILE
    if as_json:
        emit(data, is_json=True)
        return 0
    lines = ["aliases"]
    for a in m.aliases.values():
        mt = a.model_type or m.shipped_config(a.config)["model_type"]
        lines.append(f"  {a.name:<22} {a.id:<42} {mt}")
    lines.append("model types (by family)")
    for fam, d in m.families.items():
        types = [t.name for t in at.values() if t.family == fam]
        lines.append(f"  {fam}: {d['title']}")
        lines.append(f"    functions: {', '.join(d['functions'])}")
        lines.append(f"    model_type: {', '.join(types)}")
    # the last line is what --quiet prints: the count, and what happens to a model not listed
    lines.append(f"{len(m.aliases)} aliases, {len(at)} model types; any other model_type the installed transformers "
                 "knows is checked by asking its modeling module.")
    emit("\n".join(lines))  # wrapped to the terminal or 100 columns piped, as every report
    return 0
