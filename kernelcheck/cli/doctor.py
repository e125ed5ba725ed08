"""`kernelcheck doctor`: the static check (and --live) for one model or the environment alone."""

from __future__ import annotations

from typing import Any

import click

from kernelcheck.cli.common import (
    MODEL_HELP,
    context,
    device_option,
    emit,
    finish,
    guarded,
    mode_option,
    output_options,
)
from kernelcheck.cli.complete import complete_model
from kernelcheck.cli.fleet import all_ranks_options
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.cli.upgrade_args import UpgradeCommand, forward_args, upgrade_specs
from kernelcheck.core import jsonout
from kernelcheck.core.errors import BadInput
from kernelcheck.report.model import Report


@click.command(cls=UpgradeCommand)
@click.option("--model", "-m", "model", shell_complete=complete_model, default=None,
              help=MODEL_HELP + " Omit for environment and packages only.")
@mode_option
@click.option("--live", is_flag=True, help="Also run the model's real layers under the profiler (as `verify`).")
@click.option("--exact", is_flag=True,
              help="Import the model's modeling module and read transformers' own bindings (slower; the default "
                   "reads the same decorators from source and resolves them as transformers does).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.doctor/1) on stdout.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Also write a JUnit XML file: one test case per function, for CI dashboards.")
@click.option("--hub/--no-hub", "hub", default=None,
              help="--hub: the job loads with use_kernels=True (Kernel Hub); --no-hub: skip the Hub section. "
                   "Default: what the installed transformers does. See `kernelcheck hub --help`.")
@device_option("hub_device", aliases=("--hub-device",))
@click.option("--arch", default=None, metavar="9.0[,10.0...]",
              help="Check for these GPUs instead of the ones found here: for docker build stages and other "
                   "machines without a GPU (see docs/pipelines.md).")
@click.option("--packing", default=None, metavar="none|position_ids|cu_seq_lens|flash",
              help="What the job's collator passes for packed rows; a silent mix or a raise is BROKEN (exit 4). "
                   "See docs/packing.md.")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Prove afresh which kernel packages import and what transformers binds, instead of reusing the "
                   "proof of an earlier doctor in the same unchanged environment (as KERNELCHECK_IMPORT_CACHE=0; "
                   "see docs/doctor.md).")
@click.option("--jit-probe", "jit_probe", is_flag=True,
              help="Compile and run one trivial kernel with each JIT compiler the chosen implementation uses "
                   "(Triton, TileLang, FlashQLA's TileLang), in a child process; READY needs it to pass. Without a "
                   "GPU only the compile is checked. Passes are cached per toolchain (see docs/doctor.md).")
@click.option("--cache-dir", "cache_dir", default=None, type=click.Path(file_okay=False),
              help="A JIT cache folder `kernelcheck warm` baked: say per JIT whether this node would hit it, and "
                   "what a miss costs, from the keys in its manifest (nothing compiles).")
@click.option("--upgrade", "upgrade", is_flag=True,
              help="--upgrade SPEC [SPEC...] or --upgrade -r requirements.txt: forecast the verdict of the "
                   "environment `pip install SPEC...` would produce, computed in a throwaway overlay (this "
                   "environment is never changed): verdicts before and after, each function and finding that "
                   "changes, compiled packages a torch-minor change orphans. Exit: the after-verdict's. "
                   "See docs/pipelines.md.")
@click.option("--if-worse", "if_worse", is_flag=True,
              help="With --upgrade: exit with the after-verdict's code only when it is worse than now, else 0 "
                   "(a gate for dependency-update pull requests).")
@click.option("--wheelhouse", default=None, type=click.Path(file_okay=False),
              help="With --upgrade: also look for the upgrade's wheels in this folder.")
@click.option("--offline", is_flag=True, help="With --upgrade: resolve from --wheelhouse only (no index).")
@click.option("--report-issue", "report_issue", is_flag=True,
              help="Print a markdown block to paste into a bug report instead of the text report: versions, OS/glibc, "
                   "driver, cuDNN, NCCL, the kernel packages, each function's status, the findings and the verdict.")
@output_options
@output_file_option
@guarded("doctor")
@all_ranks_options("doctor")
def doctor(model: str | None, mode: str, live: bool, exact: bool, as_json: bool, junit: str | None,
           arch: str | None = None, hub: bool | None = None, hub_device: str | None = None,
           packing: str | None = None, no_cache: bool = False, upgrade: bool = False, if_worse: bool = False,
           wheelhouse: str | None = None, offline: bool = False, report_issue: bool = False,
           jit_probe: bool = False, cache_dir: str | None = None) -> int:
    """Check, without running anything, whether each fast kernel of MODEL will really run.

    Reports the environment (torch/CUDA/cxx11abi, triton, transformers, GPUs, driver, nvcc), which
    implementation transformers binds for each function (the fast kernel or its torch fallback) and why,
    known breakages for this GPU/triton/fla combination, and the fix for each.

    \b
    Examples:
      kernelcheck doctor
      kernelcheck doctor --model qwen3.8-27b --mode train
      kernelcheck doctor --model ./my-model --mode infer --json
      kernelcheck doctor --model qwen3.8-27b --arch 9.0 --junit doctor.xml   # docker build gate
      kernelcheck doctor --model qwen3.8-27b --upgrade transformers==5.25.0 kernels==0.19.1
                                                          # forecast an upgrade
    """
    from kernelcheck.commands import doctor as command

    if upgrade or if_worse or wheelhouse or offline:
        return _forecast(locals(), as_json, junit)
    if report_issue and (as_json or junit):
        raise BadInput("--report-issue prints a markdown block for a bug report; --json and --junit are the "
                       "machine-readable reports. Use one or the other (-o FILE writes the JSON beside the block).")
    req = command.Request(model=model, mode=mode, live=live, exact=exact, hub=hub, hub_device=hub_device, arch=arch,
                          packing=packing, no_cache=no_cache, jit_probe=jit_probe, cache_dir=cache_dir)
    outcome = command.run(req, context())
    if report_issue:
        return _report_issue(outcome.report)
    return finish(outcome.report, as_json, junit)


_FORECAST_ONLY = {"if_worse": "--if-worse", "wheelhouse": "--wheelhouse", "offline": "--offline"}


def _forecast(values: dict[str, Any], as_json: bool, junit: str | None) -> int:
    """doctor --upgrade runs a forecast (commands/forecast.py, whose `check` reads the specs); its own flags without
    --upgrade, and --live with it, are refused here, where doctor's flags are routed to it."""
    from kernelcheck.commands import forecast
    from kernelcheck.forecast import render

    specs = upgrade_specs() or []
    given = [flag for key, flag in _FORECAST_ONLY.items() if values.get(key)]
    if not values.get("upgrade"):
        names = " and ".join([", ".join(given[:-1]), given[-1]] if len(given) > 1 else given)
        raise BadInput(f"{names} {'applies' if len(given) == 1 else 'apply'} to a forecast only: add --upgrade "
                       "SPEC [SPEC...] (e.g. --upgrade transformers==5.25.0 kernels==0.19.1).")
    if values.get("live"):
        raise BadInput("--upgrade forecasts doctor's static reading; --live runs this environment's layers. "
                       "Run verify after the upgrade instead.")
    req = forecast.Request(tuple(specs), tuple(forward_args(values)), values.get("wheelhouse"),
                           bool(values.get("offline")), bool(values.get("if_worse")))
    fc = forecast.run(req, context()).report
    if junit:
        render.write_junit(fc, junit)

    emit(jsonout.dumps(fc.to_json(), indent=2) if as_json else render.render_text(fc), is_json=as_json)
    return fc.exit_code


def _report_issue(report: Report) -> int:
    import sys

    from kernelcheck.cli import outfile
    from kernelcheck.report import issue
    from kernelcheck.report.model import render_json

    outfile.write(render_json(report), report)
    emit(issue.render(report, issue.system(), sys.argv[1:]), is_json=True)  # markdown: printed as it is, unwrapped
    return report.exit_code
