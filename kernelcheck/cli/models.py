"""`kernelcheck models`: the models, aliases and functions the matrix knows."""

from __future__ import annotations

import json

import click

from kernelcheck import schemas
from kernelcheck.cli.common import emit, guarded, output_options


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
@output_options
@guarded("models")
def models(as_json: bool) -> int:
    """List the models kernelcheck knows: aliases, model types and the fast functions each needs."""
    from kernelcheck.core import matrix
    from kernelcheck.integrations.transformers_models import installed_version

    m = matrix.load()
    at = {n: t.at(installed_version()) for n, t in m.model_types.items()}  # as the installed transformers builds
    if as_json:
        emit(json.dumps({
            "schema": schemas.schema_id("models"), "command": "models",
            "aliases": [{"alias": a.name, "id": a.id, "model_type": a.model_type or
                         m.shipped_config(a.config)["model_type"]} for a in m.aliases.values()],
            "model_types": [{"model_type": t.name, "family": t.family, "functions": list(t.functions)}
                            for t in at.values()],
        }, indent=2), is_json=True)
        return 0
    click.echo("aliases")
    for a in m.aliases.values():
        mt = a.model_type or m.shipped_config(a.config)["model_type"]
        click.echo(f"  {a.name:<22} {a.id:<42} {mt}")
    click.echo("model types (by family)")
    for fam, d in m.families.items():
        types = [t.name for t in at.values() if t.family == fam]
        click.echo(f"  {fam}: {d['title']}")
        click.echo(f"    functions: {', '.join(d['functions'])}")
        click.echo(f"    model_type: {', '.join(types)}")
    click.echo("Any other model_type the installed transformers knows is checked by asking its modeling module.")
    return 0
