"""`kernelcheck hub`: the Kernel Hub section alone, direct repository checks, and pre-fetching, assembled once.

`kernelcheck hub` judges the Kernel Hub path only. When that path is not taken, or a check could not be completed
(the Hub unreachable for --repo, a failed --prefetch), it has proven nothing fast: exit 3, never 0. Not 4 either:
nothing was shown to crash; the job would keep (or fall back to) the torch forward or whatever doctor reports. See
docs/hub.md "Severity and exit codes".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome, reported
from kernelcheck.core.status import Finding, Mode, Severity
from kernelcheck.core.targets import TargetBuild

if TYPE_CHECKING:
    from kernelcheck.core.environment import Environment
    from kernelcheck.hub.bundle import BundleReport
    from kernelcheck.integrations.kernels_hub import HubSystem, Resolution
    from kernelcheck.report.model import HubSection, Report

HUB_DECIDES_NOTHING = "hub-decides-nothing"
_REPO = re.compile(r"^([\w.-]+/[\w.-]+)(?:@(.+))?$")
RepoSpec = tuple[str, int | None, str | None]  # repository, kernel version, revision


@dataclass(frozen=True)
class Request:
    """hub's options. `repos`: ORG/NAME@vN or ORG/NAME@REVISION; `build`: --torch/--cuda (another machine's)."""

    model: str | None = None
    mode: str = Mode.TRAIN
    use_kernels: bool | None = None
    device: str | None = None
    source: str = "auto"
    build: TargetBuild = TargetBuild()
    arch: str | None = None
    repos: tuple[str, ...] = ()
    prefetch: bool = False
    lock: str | None = None
    dry_run: bool = False


def parse_repo(text: str) -> RepoSpec:
    m = _REPO.match(text.strip())
    if not m:
        raise BadInput(f"--repo '{text}' is not ORG/NAME, ORG/NAME@vN (a kernel version) or ORG/NAME@REVISION "
                       "(a branch, tag or commit), e.g. kernels-community/fla@v2.")
    ref = m.group(2)
    if ref is None:
        raise BadInput(f"--repo '{text}' needs a version or revision, as kernels does: {m.group(1)}@v1 "
                       f"or {m.group(1)}@<commit>.")
    if re.fullmatch(r"v[0-9]+", ref):
        return m.group(1), int(ref[1:]), None
    return m.group(1), None, ref


def check(req: Request, ctx: Context) -> list[RepoSpec]:
    """Every usage rule of hub, found before anything is probed; the parsed --repo values."""
    from kernelcheck.commands import usage

    if (req.lock or req.dry_run) and not req.prefetch:
        raise BadInput("--lock and --dry-run go with --prefetch (kernelcheck hub --model M --prefetch --lock FILE).")
    if req.prefetch and not (req.model or req.repos):
        raise BadInput("--prefetch needs --model M or --repo ORG/NAME@vN: which kernels should be downloaded?")
    usage.mode(req.mode)
    usage.choice("--source", req.source, ("auto", "cache", "hub"))
    usage.model(req.model, ctx.matrix)
    return [parse_repo(r) for r in req.repos]


def run(req: Request, ctx: Context) -> Outcome[Report]:
    parsed = check(req, ctx)  # before the imports below: a usage error is answered at once
    from kernelcheck.core import gpu
    from kernelcheck.hub import check as hub_check
    from kernelcheck.integrations import kernels_hub, kernels_prefetch, transformers_models
    from kernelcheck.report.model import Report
    from kernelcheck.report.sections import EnvironmentView, ModelRef

    target = kernels_hub.HubSystem(torch=req.build.torch, cuda=req.build.cuda) if req.build.given else None
    gpus = gpu.parse_arch(req.arch, m=ctx.matrix) if req.arch else None  # the same parser as doctor and install
    env = ctx.environment(gpu_override=gpus)
    report = Report("hub", EnvironmentView.of(env), None, req.mode)
    functions: tuple[str, ...] = ()
    modeling = None
    if req.model:
        resolved = transformers_models.resolve(req.model, m=ctx.matrix)
        report.model = ModelRef.of(resolved)
        modeling = kernels_prefetch.modeling_module(resolved.spec.module)
        functions = tuple(resolved.spec.functions)
    # pre-fetch first, so the section below shows the cache as the job will find it
    if req.prefetch:
        dev = gpu.default_device(env, req.device, target)
        _prefetch(report, env, req, modeling, functions, dev, parsed, target, ctx)
    section = hub_check.check(report, env, modeling, functions, req.mode, use_hub=req.use_kernels, device=req.device,
                              source=req.source, query=req.model, target=target, m=ctx.matrix)
    for repo_id, version, revision in parsed:
        res = kernels_hub.resolve_repo(repo_id, version=version, revision=revision, source=req.source, env=env,
                                       target=target)
        judge_repo(report, section, res)
    # --prefetch asks a different question (are the builds in the cache?): its steps carry its verdict
    nothing = hub_check.decides_nothing(section, req.model, req.mode) if req.model and not parsed and not req.prefetch \
        else None
    if nothing is not None:
        report.findings.append(nothing)
    return reported(report)


def run_bundle(req: Request, bundle: str | None, verify_bundle: str | None, ctx: Context) -> BundleReport:
    """--bundle FILE (build, online) or --verify-bundle FILE (the air-gapped node): hub/bundle.py, bundle_verify.py."""
    from kernelcheck.core import gpu
    from kernelcheck.integrations import kernels_hub

    if bundle and verify_bundle:
        raise BadInput("--bundle writes a bundle and --verify-bundle checks one: give one of them.")
    if req.prefetch or req.lock or req.dry_run:
        raise BadInput("--bundle and --verify-bundle do not go with --prefetch, --lock or --dry-run (the bundle "
                       "holds the builds and a kernels.lock).")
    if verify_bundle:
        if req.model or req.repos:
            raise BadInput("--verify-bundle FILE checks what FILE holds: --model and --repo were given when it was "
                           "built, not here.")
        from kernelcheck.hub import bundle_verify

        return bundle_verify.verify(verify_bundle)
    if not (req.model or req.repos):
        raise BadInput("--bundle needs --model M or --repo ORG/NAME@vN: which kernels should it hold?")
    from kernelcheck.hub import bundle as bundle_mod

    parsed = check(req, ctx)
    target = kernels_hub.HubSystem(torch=req.build.torch, cuda=req.build.cuda) if req.build.given else None
    gpus = gpu.parse_arch(req.arch, m=ctx.matrix) if req.arch else None
    env = ctx.environment(gpu_override=gpus)
    dev = gpu.default_device(env, req.device, target)
    breq = bundle_mod.BuildRequest(bundle or "", req.model, req.mode, dev, gpu.capability_number(env), tuple(parsed))
    return bundle_mod.build(breq, env, target, m=ctx.matrix, say=lambda s: ctx.sink(f"kernelcheck hub: {s}"))


def _prefetch(report: Report, env: Environment, req: Request, modeling: str | None, functions: tuple[str, ...],
              dev: str, parsed: list[RepoSpec], target: HubSystem | None, ctx: Context) -> None:
    from kernelcheck.core import gpu
    from kernelcheck.core.plan_step import Step, StepKind
    from kernelcheck.hub import prefetch
    from kernelcheck.integrations import kernels_prefetch
    from kernelcheck.integrations.transformers_hub import HubRepo

    repos: list[HubRepo] = []
    if req.model:
        repos.extend(kernels_prefetch.model_repos(modeling or "", functions, req.mode, dev,
                                                  gpu.capability_number(env),
                                                  model_type=report.model.model_type if report.model else None,
                                                  m=ctx.matrix))
    repos.extend(HubRepo(r, "", v, rev) for r, v, rev in parsed)

    def say(line: str) -> None:
        ctx.sink(f"kernelcheck hub: {line}")

    if not repos:
        report.plan = [Step("-", "skip", "hub", "-", "no Hub kernel is mapped for this model, device and mode",
                            kind=StepKind.HUB)]
        return
    steps = kernels_prefetch.prefetch(repos, env=env, lock_path=req.lock, dry_run=req.dry_run, progress=say,
                                      target=target)
    report.plan = steps
    report.findings.extend(prefetch.findings(steps))


def judge_repo(report: Report, section: HubSection, res: Resolution) -> None:
    """What `kernelcheck hub --repo` adds: the Resolution in `repos`, its lines in `items`, and its finding."""
    from kernelcheck.report.hub import RepoCheckLines

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
