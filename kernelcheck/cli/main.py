"""The command line: a thin click layer that wires modules together and maps outcomes to exit codes.

Exit codes, identical for every command: 0 ready · 3 a slow fallback path would run ·
4 broken (crash, refusal, wrong results) · 2 bad usage or bad input · 1 internal error.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from kernelcheck import SCHEMA, __version__
from kernelcheck.cli.fleet import all_ranks_options
from kernelcheck.core.errors import BadInput, KernelcheckError
from kernelcheck.fleet import handoff
from kernelcheck.report.model import EXIT_INTERNAL, Finding, Report, render_json, render_text

MODEL_HELP = ("Model: an alias (qwen3.8-27b; see `kernelcheck models`), a Hub id (Qwen/Qwen3.8-27B: HF cache first, "
              "then config.json only from the Hub), a model_type (mamba2) or a folder with config.json.")
MODE_HELP = "train (forward+backward: backward-only breakages count) or infer (prefill+decode). Default: train."


def _junit_error(command: str, kwargs: dict[str, Any], exc: KernelcheckError) -> None:
    """A run that ends before its report still leaves the --junit file, holding the reason."""
    if not kwargs.get("junit"):
        return
    from kernelcheck.report import junit as junit_mod

    try:
        junit_mod.write_error(command, kwargs["junit"], exc.message, exc.exit_code, kwargs.get("model"))
    except KernelcheckError:
        pass  # the original error is the one to report


def _emit_error(command: str, as_json: bool, exc: KernelcheckError) -> None:
    if as_json:
        click.echo(json.dumps({"schema": SCHEMA, "command": command, "verdict": None,
                               "exit_code": exc.exit_code, "error": exc.message}, indent=2))
    click.echo(f"kernelcheck {command}: {exc.message}", err=True)


def guarded(command: str) -> Callable:
    """Turn known errors into their exit code and message; unknown ones into exit 1, no traceback."""

    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            as_json = bool(kwargs.get("as_json"))
            try:
                code = fn(*args, **kwargs)
            except KernelcheckError as exc:
                _junit_error(command, kwargs, exc)
                _emit_error(command, as_json, exc)
                sys.exit(exc.exit_code)
            except (KeyboardInterrupt, click.exceptions.Exit, click.ClickException):
                raise
            except Exception as exc:  # noqa: BLE001 - the documented exit 1
                if os.environ.get("KERNELCHECK_DEBUG"):
                    traceback.print_exc()
                err = KernelcheckError(f"internal error ({type(exc).__name__}: {exc}). This is a kernelcheck bug; "
                                       "rerun with KERNELCHECK_DEBUG=1 for the traceback and report it.")
                err.exit_code = EXIT_INTERNAL
                _junit_error(command, kwargs, err)
                _emit_error(command, as_json, err)
                sys.exit(EXIT_INTERNAL)
            sys.exit(code or 0)

        return wrapper

    return deco


def _finish(report: Report, as_json: bool, junit: str | None = None) -> int:
    if junit:
        from kernelcheck.report import junit as junit_mod

        junit_mod.write(report, junit)
    if handoff.take(report):  # --all-ranks: the fleet gate prints, on rank 0
        return report.exit_code
    click.echo(render_json(report) if as_json else render_text(report))
    return report.exit_code


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kernelcheck")
def main() -> None:
    """Will the fast kernels of your transformers model really run here? If not, why, and the exact fix.

    \b
    Typical use:
      kernelcheck doctor --model qwen3.8-27b            # static check, seconds
      kernelcheck install --model qwen3.8-27b --dry-run # what would be installed, and why
      kernelcheck verify --model qwen3.8-27b            # run the real layers under the profiler
      kernelcheck trace step.json.gz                    # why a "98% busy" GPU is starved

    Exit codes (every command): 0 ready, 3 a slow fallback path would run, 4 broken (crash, refusal or
    wrong results), 2 bad usage or input, 1 internal error. Use `kernelcheck doctor --model M --mode train`
    as a pipeline gate.
    """


@main.command()
@click.option("--model", "-m", "model", default=None, help=MODEL_HELP + " Omit for environment and packages only.")
@click.option("--mode", type=click.Choice(["train", "infer"]), default="train", show_default=True, help=MODE_HELP)
@click.option("--live", is_flag=True, help="Also run the model's real layers under the profiler (as `verify`).")
@click.option("--exact", is_flag=True,
              help="Import the model's modeling module and read transformers' own bindings (slower; the default "
                   "reads the same decorators from source and resolves them as transformers does).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.report/1) on stdout.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Also write a JUnit XML file: one test case per function, for CI dashboards.")
@click.option("--hub/--no-hub", "hub", default=None,
              help="--hub: the job loads with use_kernels=True (Kernel Hub); --no-hub: skip the Hub section. "
                   "Default: what the installed transformers does. See `kernelcheck hub --help`.")
@click.option("--hub-device", type=click.Choice(["cuda", "rocm", "xpu", "cpu", "mps", "npu"]), default=None,
              help="Device type the job runs on, for the Hub mapping (default: from the torch build).")
@click.option("--arch", default=None, metavar="9.0[,10.0...]",
              help="Check for these GPUs instead of the ones found here: for docker build stages and other "
                   "machines without a GPU (see docs/pipelines.md).")
@guarded("doctor")
@all_ranks_options("doctor")
def doctor(model: str | None, mode: str, live: bool, exact: bool, as_json: bool, junit: str | None,
           arch: str | None = None, hub: bool | None = None, hub_device: str | None = None) -> int:
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
    """
    from kernelcheck.doctor.run import doctor as run_doctor

    env = None
    if arch is not None:
        from kernelcheck.core import environment
        from kernelcheck.core import gpu as targets

        if live:
            raise BadInput("--live runs the model's layers on this machine's GPU; --arch names GPUs that are not "
                           "here. Use one or the other.")
        # Packages are probed after binding, as doctor does without --arch.
        env = environment.probe(packages=False, gpu_override=targets.parse_arch(arch))
    report = run_doctor(model, mode, env=env, exact=exact, hub=hub, hub_device=hub_device)
    if env is not None:
        report.findings.insert(0, Finding(
            "gpu-target", "info", "GPUs from --arch "
            + ", ".join(f"sm_{g.capability.replace('.', '')}" for g in env.gpus)
            + ", not probed: the verdict is for an image that will run on those GPUs with a driver that "
              "supports this torch's CUDA."))
    if live and model:
        from kernelcheck.verify import run as live_mod

        live_mod.merge_into(report, model, mode)
    return _finish(report, as_json, junit)


@main.command()
@click.option("--model", "-m", "model", required=True, help=MODEL_HELP)
@click.option("--shape", type=click.Choice(["tiny", "full"]), default="tiny", show_default=True,
              help="tiny: a few small layers, the same code path (seconds, CPU or GPU). full: one real-size layer "
                   "of each type (GPU only).")
@click.option("--mode", type=click.Choice(["train", "infer"]), default="train", show_default=True, help=MODE_HELP)
@click.option("--benchmark", is_flag=True,
              help="Also time the model's kernel-calling layer on the bound path and on the forced torch reference.")
@click.option("--tokens", type=int, default=None,
              help="Prefill length (batch 1). Default: 128 for tiny, 8192 for full (matrix/verify.toml).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.report/1) on stdout.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Also write a JUnit XML file: one test case per function, for CI dashboards.")
@guarded("verify")
@all_ranks_options("verify")
def verify(model: str, shape: str, mode: str, benchmark: bool, tokens: int | None, as_json: bool,
           junit: str | None) -> int:
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
    """
    from kernelcheck.verify.run import verify as run_verify

    report = run_verify(model, mode=mode, shape=shape, benchmark=benchmark, tokens=tokens)
    return _finish(report, as_json, junit)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
@guarded("models")
def models(as_json: bool) -> int:
    """List the models kernelcheck knows: aliases, model types and the fast functions each needs."""
    from kernelcheck.core import matrix

    m = matrix.load()
    if as_json:
        click.echo(json.dumps({
            "schema": SCHEMA, "command": "models",
            "aliases": [{"alias": a.name, "id": a.id, "model_type": a.model_type or
                         m.shipped_config(a.config)["model_type"]} for a in m.aliases.values()],
            "model_types": [{"model_type": t.name, "family": t.family, "functions": list(t.functions)}
                            for t in m.model_types.values()],
        }, indent=2))
        return 0
    click.echo("aliases")
    for a in m.aliases.values():
        mt = a.model_type or m.shipped_config(a.config)["model_type"]
        click.echo(f"  {a.name:<22} {a.id:<42} {mt}")
    click.echo("model types (by family)")
    for fam, d in m.families.items():
        types = [t.name for t in m.model_types.values() if t.family == fam]
        click.echo(f"  {fam}: {d['title']}")
        click.echo(f"    functions: {', '.join(d['functions'])}")
        click.echo(f"    model_type: {', '.join(types)}")
    click.echo("Any other model_type the installed transformers knows is checked by asking its modeling module.")
    return 0


@main.command()
@click.option("--model", "-m", "model", required=True, help=MODEL_HELP)
@click.option("--mode", type=click.Choice(["train", "infer"]), default="train", show_default=True, help=MODE_HELP)
@click.option("--dry-run", is_flag=True, help="Print the plan (every step, why, every rejected candidate) and stop.")
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
@click.option("--offline", is_flag=True, help="Use no network: wheelhouse and --sdist only (also KERNELCHECK_OFFLINE=1).")
@click.option("--target", type=click.Path(file_okay=False), default=None,
              help="Install into this folder (pip --target) instead of the environment; use it with PYTHONPATH=DIR "
                   "where site-packages is read-only.")
@click.option("--jobs", type=click.IntRange(1, 512), default=None,
              help="Parallel compile jobs (MAX_JOBS); default from cores and free memory (4 GiB a job).")
@guarded("install")
def install(model: str, mode: str, dry_run: bool, as_json: bool, wheelhouse: str | None, arch: str | None,
            source: str, sdist: str | None, packages: tuple[str, ...], allow_change: tuple[str, ...],
            with_packages: tuple[str, ...], offline: bool, target: str | None, jobs: int | None) -> int:
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
      kernelcheck install --model qwen3.8-27b --source build --sdist causal_conv1d-1.7.0.tar.gz \\
          --wheelhouse ./wh --offline --target /tmp/site                            # air-gapped build

    \b
    Exit codes: 0 ready; 3 a package was refused or blocked (its torch fallback stays);
    4 broken (a predicted breakage such as fla#640, or a failed step: nothing was changed);
    2 bad flags or input; 1 internal error.
    """
    from kernelcheck.install import command as install_mod

    req = install_mod.Request(model=model, mode=mode, dry_run=dry_run, wheelhouse=wheelhouse, arch=arch,
                              source=source, allow_change=allow_change, with_packages=with_packages,
                              packages=packages, offline=offline, target=target, sdist=sdist, jobs=jobs)
    report, code = install_mod.run(req, click.echo, as_json)
    click.echo(install_mod.to_json(report, code) if as_json else install_mod.render(report, code, dry_run))
    return code


@main.command()
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.report/1) on stdout.")
@guarded("trace")
def trace(file: str, as_json: bool) -> int:
    """Diagnose a torch profiler trace (Chrome trace JSON, plain or .gz) of a real step.

    Per ProfilerStep: CPU ops, GPU kernels (memcpy/memset apart), CPU span, GPU busy time (union of
    kernel intervals), idle gaps, launch delays, top kernels; then whether the step carries the
    signature of transformers' torch reference path (thousands of small elementwise/triu/depthwise-conv
    kernels and no fla / causal-conv1d kernel: it names the missing package) or is launch-bound
    (nvidia-smi reads ~100% while the GPU waits for launches). Large traces are streamed.

    \b
    Record one (see docs/trace.md):
      with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
              schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
              on_trace_ready=lambda p: p.export_chrome_trace("step.json.gz")) as prof:
          for batch in loader: train_step(batch); prof.step()

    \b
    Examples:
      kernelcheck trace step.json.gz
      kernelcheck trace rank0.pt.trace.json --json | jq .summary

    Exit codes: 0 healthy, 3 a fallback signature or a launch-bound step, 2 not a readable trace.
    """
    from kernelcheck.trace import analysis as trace_mod

    report = trace_mod.trace_report(file, progress=trace_mod.progress_to_stderr)
    click.echo(render_json(report) if as_json else trace_mod.render_text(report))
    return report.exit_code


from kernelcheck.cli.hub import hub as _hub_command  # noqa: E402 - registered after main exists

main.add_command(_hub_command)

from kernelcheck.cli.compare import compare_command as _compare_command  # noqa: E402

main.add_command(_compare_command)

if __name__ == "__main__":
    main()
