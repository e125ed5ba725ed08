"""`kernelcheck hub`: the Kernel Hub section alone, direct repo checks, and pre-fetching for offline jobs."""

from __future__ import annotations

import click

from kernelcheck.cli.common import MODEL_HELP, context, device_option, finish, guarded, mode_option, output_options
from kernelcheck.cli.complete import complete_model
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.cli.targets import parse_target, target_options


@click.command("hub")
@click.option("--model", "-m", "model", shell_complete=complete_model, default=None, help=MODEL_HELP)
@mode_option
@click.option("--use-kernels/--default-use-kernels", "use_kernels", default=None,
              help="--use-kernels: the job passes use_kernels=True (default: what from_pretrained defaults to).")
@device_option("device")
@click.option("--source", type=click.Choice(["auto", "cache", "hub"]), default="auto", show_default=True,
              help="Where build variants are listed from: auto = as kernels does (LOCAL_KERNELS, then the Hub, or "
                   "the HF cache when HF_HUB_OFFLINE=1); cache = never use the network.")
@target_options(python=False)
@click.option("--arch", "arch", default=None, metavar="X.Y",
              help="GPU compute capability to check builds against (kernels' check_arch), e.g. 9.0 for H100/H200.")
@click.option("--repo", "repos", multiple=True, metavar="ORG/NAME@vN",
              help="Also resolve this kernel repository directly (repeatable).")
@click.option("--prefetch", is_flag=True, help="Download the chosen build variants into the cache for offline jobs.")
@click.option("--lock", "lock", type=click.Path(dir_okay=True), default=None,
              help="With --prefetch: write a lock in kernels' format (a folder gets FOLDER/kernels.lock).")
@click.option("--dry-run", is_flag=True, help="With --prefetch: say what would be downloaded, download nothing.")
@click.option("--bundle", "bundle", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write one file (tar.gz) holding every Hub build the model's load resolves, with kernels' "
                   "checks, for an air-gapped node (run where the Hub is reachable).")
@click.option("--verify-bundle", "verify_bundle", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="On the air-gapped node: will the offline load succeed from FILE? (kernels' own checks)")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object (schema kernelcheck.hub/1; with --bundle or --verify-bundle: "
                   "kernelcheck.hub-bundle/1) on stdout.")
@output_options
@output_file_option
@guarded("hub")
def hub(model: str | None, mode: str, use_kernels: bool | None, device: str | None, source: str,
        torch_v: str | None, cuda_v: str | None, arch: str | None, repos: tuple[str, ...], prefetch: bool,
        lock: str | None, dry_run: bool, bundle: str | None, verify_bundle: str | None, as_json: bool) -> int:
    """Will transformers take MODEL's kernels from the Hugging Face Kernel Hub, and which build?

    Reads the installed transformers' Hub mapping, the `kernels` version window it accepts,
    USE_HUB_KERNELS and the use_kernels default; then resolves each mapped repository with kernels'
    own variant resolver for this torch/CUDA and lists every build variant with the reason it lost.
    A repository with no build for this torch means a silent slow path (exit 3) when the job uses
    Hub kernels. --prefetch downloads exactly the chosen builds (run it online, e.g. in a docker build
    stage) and --lock pins them in kernels' lock format; then run jobs with HF_HUB_OFFLINE=1.

    \b
    Examples:
      kernelcheck hub --model qwen3.8-27b
      kernelcheck hub --model qwen3.8-27b --use-kernels --device cuda --json
      kernelcheck hub --repo kernels-community/fla@v2
      kernelcheck hub --model qwen3.8-27b --torch 2.11 --cuda 13.0 --arch 9.0 --prefetch
                                                          # on a CPU build box
      kernelcheck hub --model qwen3.8-27b --prefetch --lock /opt/job/kernels.lock
      HF_HUB_OFFLINE=1 kernelcheck hub --model qwen3.8-27b --use-kernels   # in the job: cache only
      kernelcheck hub --model llama --torch 2.11 --cuda 13.0 --bundle kernels.tar.gz
      kernelcheck hub --verify-bundle kernels.tar.gz          # on the air-gapped node
    """
    from kernelcheck.commands import hub as command

    req = command.Request(model=model, mode=mode, use_kernels=use_kernels, device=device, source=source,
                          build=parse_target(torch_v, cuda_v), arch=arch, repos=repos, prefetch=prefetch, lock=lock,
                          dry_run=dry_run)
    if bundle or verify_bundle:
        from kernelcheck.cli import outfile
        from kernelcheck.cli.common import emit

        rep = command.run_bundle(req, bundle, verify_bundle, context(sink=lambda line: click.echo(line, err=True)))
        outfile.write(rep.render(True))
        emit(rep.render(as_json), is_json=as_json)
        return rep.exit_code
    outcome = command.run(req, context(sink=lambda line: click.echo(line, err=True)))
    return finish(outcome.report, as_json)
