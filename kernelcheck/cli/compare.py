"""`kernelcheck compare REPORT...`: the fleet table for reports written per node (shared volume, prolog)."""

from __future__ import annotations

import click

from kernelcheck.cli import outfile
from kernelcheck.cli.common import context, emit, guarded, output_options
from kernelcheck.cli.outfile import output_file_option


@click.command("compare")
@click.argument("reports", nargs=-1, required=True)
@click.option("--expect", type=click.IntRange(min=1), default=None, metavar="N",
              help="The job has N nodes/ranks: fewer reports than N is a missing rank (exit 4).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.fleet/1) on stdout.")
@click.option("--format", "fmt", type=click.Choice(["healthevent", "nodeverdict"]), default=None,
              help="JSON for a cluster's health tooling instead: NVSentinel HealthEvents (never fatal, no node "
                   "action) or one software node verdict per report (docs/fleet.md, blame table).")
@output_file_option
@output_options
@guarded("compare")
def compare_command(reports: tuple[str, ...], expect: int | None, as_json: bool, fmt: str | None) -> int:
    """Compare REPORTS (files from `kernelcheck doctor/verify --json`, or folders of them) as one fleet.

    Prints the same fleet table as `--all-ranks`: one row per report (named by its file), the
    differences that matter (identical reports grouped, the odd ones named with each differing field),
    and exits with the worst report's code: 0 ready, 3 fallback, 4 broken or a missing report (--expect),
    2 a file that is not a report of this kernelcheck's schema.

    \b
    Examples:
      kernelcheck compare /shared/kernelcheck/$SLURM_JOB_ID/        # one JSON per node, from a prolog
      kernelcheck compare reports/*.json --expect 16 --json
      kernelcheck compare node.json --format healthevent   # for NVSentinel
    """
    from kernelcheck.commands import compare as command

    outcome = command.run(command.Request(reports, expect), context())
    outfile.write(outcome.report.render(True))
    emit(outcome.report.render(as_json, fmt), is_json=as_json or fmt is not None)
    return outcome.exit_code
