"""`kernelcheck install`: plan and install the kernel packages a model needs."""

from __future__ import annotations

import click

from kernelcheck.cli import outfile
from kernelcheck.cli.common import MODEL_HELP, context, emit, guarded, mode_option, output_options, shown, verbose
from kernelcheck.cli.complete import complete_model
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.cli.targets import parse_target, target_options


@click.command()
@click.option("--model", "-m", "model", shell_complete=complete_model, required=True, help=MODEL_HELP)
@mode_option
@click.option("--dry-run", is_flag=True,
              help="Print the plan (every step, why, every rejected candidate) and stop; changes nothing (wheels "
                   "it inspects are downloaded into a temporary folder, removed after).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the report plus `plan` (progress on stderr).")
@click.option("--wheelhouse", type=click.Path(file_okay=False), default=None,
              help="Folder of wheels/sdists to use first and to keep built wheels in "
                   "(default $KERNELCHECK_HOME/wheelhouse or ~/.cache/kernelcheck/wheelhouse).")
@click.option("--arch", default=None, help="Target GPU compute capabilities, e.g. 9.0 or 8.0,9.0: for machines "
              "without the GPU (docker build stages); default: the GPUs found here.")
@click.option("--source", type=click.Choice(["auto", "wheelhouse", "release", "build", "pypi", "hub"]),
              default="auto", show_default=True,
              help="Where packages may come from; auto tries wheelhouse, upstream release wheel, then a source build.")
@click.option("--sdist", type=click.Path(dir_okay=False), default=None,
              help="Source distribution to build from (e.g. causal_conv1d-1.7.0.tar.gz), for offline builds.")
@click.option("--package", "packages", multiple=True, metavar="DIST[==VER]",
              help="Only these packages (repeatable), optionally at a version: --package causal-conv1d==1.7.0.")
@click.option("--allow-change", "allow_change", multiple=True, type=click.Choice(["torch", "triton", "transformers"]),
              help="Let the plan change this pinned package (repeatable). Without it, such plans stop.")
@click.option("--with", "with_packages", multiple=True, metavar="DIST",
              help="Also install an offered fix, e.g. --with tilelang (fla#640 on Hopper).")
@click.option("--no-fixes", "no_fixes", is_flag=True,
              help="Train mode installs additive fixes (tilelang for fla#640 on Hopper) by default; only offer them.")
@click.option("--without", "without", multiple=True, metavar="DIST",
              help="Do not install this default fix (repeatable), e.g. --without tilelang.")
@click.option("--offline", is_flag=True,
              help="Use no network: wheelhouse and --sdist only (also KERNELCHECK_OFFLINE=1).")
@click.option("--target", type=click.Path(file_okay=False), default=None,
              help="Install into this folder (pip --target) instead of the environment; use it with PYTHONPATH=DIR "
                   "where site-packages is read-only.")
@target_options()
@click.option("--expect-plan", "expect_plan", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="The JSON of an earlier `install --dry-run -o FILE`: each wheel it planned must still have the "
                   "sha256 it had then, or nothing is installed.")
@click.option("--jobs", type=click.IntRange(1, 512), default=None,
              help="Parallel compile jobs (MAX_JOBS); default from cores and free memory (4 GiB a job).")
@output_options
@output_file_option
@guarded("install")
def install(model: str, mode: str, dry_run: bool, as_json: bool, wheelhouse: str | None, arch: str | None,
            source: str, sdist: str | None, packages: tuple[str, ...], allow_change: tuple[str, ...],
            with_packages: tuple[str, ...], offline: bool, target: str | None, jobs: int | None,
            no_fixes: bool = False, without: tuple[str, ...] = (), torch_v: str | None = None,
            cuda_v: str | None = None, python_v: str | None = None, expect_plan: str | None = None) -> int:
    """Install the kernel packages MODEL needs for the installed torch/CUDA/GPU, never changing torch.

    First a plan: for each package the step (keep, install, build, offer, refuse, blocked), its source,
    the exact command, why it won, and every rejected candidate with its reason. Then (unless --dry-run)
    the wheels are fetched or built and verified (sha256, tags, GPU arch in the .so), installed with
    `pip --no-deps` and a constraints file pinning torch, triton and transformers, checked by import,
    recorded in a manifest, and doctor runs again in a fresh process.

    \b
    Examples:
      kernelcheck install --model qwen3.8-27b --dry-run
      kernelcheck install --model qwen3.8-27b --mode infer --json
      kernelcheck install --model qwen3.8-27b --arch 9.0 --wheelhouse /wheels     # docker build stage
      kernelcheck install --model qwen3.8-27b --dry-run --torch 2.11 --cuda 13.0 \\
          --python 3.12 --arch 9.0                       # a CPU box plans for an H200 image
      kernelcheck install --model qwen3.8-27b --source build --sdist causal_conv1d-1.7.0.tar.gz \\
          --wheelhouse ./wh --offline --target /tmp/site                            # air-gapped build

    \b
    Exit codes: 0 ready; 3 a package was refused or blocked (its torch fallback stays);
    4 broken (a predicted breakage such as fla#640, or a failed step: nothing was changed);
    2 bad flags or input; 1 internal error; 130/143 interrupted by SIGINT/SIGTERM (the environment
    is as it was, or the completed install: the last stderr line says which).
    """
    from kernelcheck.commands import install as command
    from kernelcheck.install.command import Request, render, to_json

    req = Request(model=model, mode=mode, dry_run=dry_run, wheelhouse=wheelhouse, arch=arch, source=source,
                  allow_change=allow_change, with_packages=with_packages, packages=packages, offline=offline,
                  target=target, sdist=sdist, jobs=jobs, fixes=not no_fixes, without=without,
                  build=parse_target(torch_v, cuda_v, python_v), expect_plan=expect_plan)
    outcome = command.run(req, context(shown, as_json=as_json))
    outfile.write(to_json(outcome))
    emit(to_json(outcome) if as_json else render(outcome, dry_run, verbose()), is_json=as_json)
    return outcome.exit_code
