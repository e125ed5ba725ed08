"""`kernelcheck hub`: the Kernel Hub section alone, direct repo checks, and pre-fetching for offline jobs."""

from __future__ import annotations

import re
from typing import Any

import click

from kernelcheck.cli.common import MODEL_HELP, device_option, finish, guarded, mode_option, output_options
from kernelcheck.cli.outfile import output_file_option
from kernelcheck.cli.targets import parse_target, target_options
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Severity

_REPO = re.compile(r"^([\w.-]+/[\w.-]+)(?:@(.+))?$")


def _parse_repo(text: str) -> tuple[str, int | None, str | None]:
    m = _REPO.match(text.strip())
    if not m:
        raise BadInput(f"--repo '{text}' is not ORG/NAME, ORG/NAME@vN (a kernel version) or ORG/NAME@REVISION "
                       "(a branch, tag or commit), e.g. kernels-community/fla@v2.")
    ref = m.group(2)
    if ref is None:
        raise BadInput(f"--repo '{text}' needs a version or revision, as kernels does: {m.group(1)}@v1 "
                       f"or {m.group(1)}@<commit>.")
    if re.fullmatch(r"v\d+", ref):
        return m.group(1), int(ref[1:]), None
    return m.group(1), None, ref


@click.command("hub")
@click.option("--model", "-m", "model", default=None, help=MODEL_HELP)
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
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.hub/1) on stdout.")
@output_options
@output_file_option
@guarded("hub")
def hub(model: str | None, mode: str, use_kernels: bool | None, device: str | None, source: str,
        torch_v: str | None, cuda_v: str | None, arch: str | None, repos: tuple[str, ...], prefetch: bool,
        lock: str | None, dry_run: bool, as_json: bool) -> int:
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
      kernelcheck hub --model qwen3.8-27b --torch 2.11 --cuda 13.0 --arch 9.0 --prefetch   # CPU build box
      kernelcheck hub --model qwen3.8-27b --prefetch --lock /opt/job/kernels.lock
      HF_HUB_OFFLINE=1 kernelcheck hub --model qwen3.8-27b --use-kernels   # in the job: cache only
    """
    from kernelcheck.core import environment, gpu
    from kernelcheck.hub import check as hub_check
    from kernelcheck.integrations import kernels_hub, kernels_prefetch, transformers_models
    from kernelcheck.report.model import Report
    from kernelcheck.report.sections import EnvironmentView, ModelRef

    if (lock or dry_run) and not prefetch:
        raise BadInput("--lock and --dry-run go with --prefetch (kernelcheck hub --model M --prefetch --lock FILE).")
    if prefetch and not (model or repos):
        raise BadInput("--prefetch needs --model M or --repo ORG/NAME@vN: which kernels should be downloaded?")
    parsed = [_parse_repo(r) for r in repos]
    build = parse_target(torch_v, cuda_v)
    target = kernels_hub.HubSystem(torch=build.torch, cuda=build.cuda) if build.given else None
    gpus = gpu.parse_arch(arch) if arch else None  # the same parser as doctor and install
    env = environment.probe(gpu_override=gpus)
    report = Report("hub", EnvironmentView.of(env), None, mode)
    functions: tuple[str, ...] = ()
    modeling = None
    if model:
        resolved = transformers_models.resolve(model)
        report.model = ModelRef.of(resolved)
        modeling = kernels_prefetch.modeling_module(resolved.spec.module)
        functions = tuple(resolved.spec.functions)
    # pre-fetch first, so the section below shows the cache as the job will find it
    if prefetch:
        dev = gpu.default_device(env, device, target)
        _prefetch(report, env, model, modeling, functions, mode, dev, parsed, lock, dry_run, target)
    section = hub_check.check(report, env, modeling, functions, mode, use_hub=use_kernels, device=device,
                              source=source, query=model, target=target)
    for repo_id, version, revision in parsed:
        res = kernels_hub.resolve_repo(repo_id, version=version, revision=revision, source=source, env=env,
                                   target=target)
        _judge_repo(report, section, res)
    # --prefetch asks a different question (are the builds in the cache?): its steps carry its verdict
    nothing = hub_check.decides_nothing(section, model, mode) if model and not parsed and not prefetch else None
    if nothing is not None:
        report.findings.append(nothing)
    return finish(report, as_json)


# `kernelcheck hub` judges the Kernel Hub path only. When that path is not taken, or a check could not be
# completed (the Hub unreachable for --repo, a failed --prefetch), it has proven nothing fast: exit 3, never 0.
# Not 4 either: nothing was shown to crash; the job would keep (or fall back to) the torch forward or whatever
# doctor reports. See docs/hub.md "Severity and exit codes" (hub/check.py decides_nothing).


def _prefetch(report: Any, env: Any, model: str | None, modeling: str | None, functions: tuple[str, ...],
              mode: str, dev: str, parsed: list[tuple[str, int | None, str | None]], lock: str | None,
              dry_run: bool, target: Any) -> None:
    from kernelcheck.core import gpu
    from kernelcheck.core.plan_step import Step, StepKind
    from kernelcheck.integrations import kernels_hub, kernels_prefetch
    from kernelcheck.report.model import Finding

    targets = []
    if model:
        targets.extend(kernels_prefetch.model_repos(modeling or "", functions, mode, dev,
                                                    gpu.capability_number(env)))
    targets.extend(kernels_hub.HubRepo(r, "", v, rev) for r, v, rev in parsed)

    def say(line: str) -> None:
        click.echo(f"kernelcheck hub: {line}", err=True)

    if not targets:
        report.plan = [Step("-", "skip", "hub", "-", "no Hub kernel is mapped for this model, device and mode",
                            kind=StepKind.HUB)]
        return
    steps = kernels_prefetch.prefetch(targets, env=env, lock_path=lock, dry_run=dry_run, progress=say, target=target)
    report.plan = steps
    for st in steps:
        if st.action in ("failed", "skipped"):  # an incomplete step, not a crash: see hub-decides-nothing
            report.findings.append(Finding(f"hub-prefetch-{st.action}", Severity.FALLBACK,
                                           f"{st.spec}: {st.reason} (the build is not in the cache)",
                                           st.command or None))
        elif st.action == "missing":
            report.findings.append(Finding("hub-prefetch-missing", Severity.FALLBACK, f"{st.spec}: {st.reason}"))


def _judge_repo(report: Any, section: Any, res: Any) -> None:
    from kernelcheck.report.hub import RepoCheckLines
    from kernelcheck.report.model import Finding

    section.repos.append(res)
    section.items.append(RepoCheckLines(res))
    if res.error:
        report.findings.append(Finding(
            "hub-repo-unresolved", Severity.FALLBACK,
            f"{res.spec}: {res.error}. Nothing was checked for this repository, so it is not known to load.",
            f"run online, or kernelcheck hub --repo {res.spec} --prefetch where the Hub is reachable"))
    elif not res.chosen:
        report.findings.append(Finding(
            "hub-no-variant", Severity.FALLBACK,
            f"{res.spec} has no build for this torch/CUDA (from {res.source}); nearest {res.nearest}, which would "
            f"match {res.would_match}", f"run on {res.would_match}"))
    elif res.blocked:
        report.findings.append(Finding("hub-snapshot-incomplete", Severity.FALLBACK,
                                       f"{res.spec}: build {res.chosen} is cached but {res.blocked}",
                                       f"kernelcheck hub --repo {res.spec} --prefetch"))
    elif res.problem:
        report.findings.append(Finding("hub-build-fails", Severity.BROKEN,
                                       f"{res.spec} build {res.chosen}: {res.problem}"))
