"""`kernelcheck install`: plan (and carry out) the kernel packages a model needs, never touching torch.

doctor's view of the environment and the model's needs -> candidates (sources.gather) -> plan
(plan.make_plan, pure) -> printed -> with --dry-run stop; else lock, prepare and install
(installer.execute), record the manifest, and run doctor again in a fresh process.

Exit codes: 0 every needed package is (or would be) installed and the job is ready; 3 a package was
refused or blocked (it cannot be installed here, or only by changing torch/triton/transformers), so
its torch fallback stays; 4 the result is broken (a predicted breakage such as fla#640 in train mode,
or an install/build step failed - then nothing was changed); 2 bad flags or input; 1 internal error;
130/143 interrupted by SIGINT/SIGTERM (rolled back, or after the commit: the completed install).
After a real install with a GPU present the exit code is the post-install doctor's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from kernelcheck.core import decide, environment, jsonout, lifeline, matrix, settings, signals
from kernelcheck.core import gpu as targets
from kernelcheck.core.errors import BadInput, InstallFailed, Interrupted, KernelcheckError
from kernelcheck.core.outcome import Outcome, reported
from kernelcheck.core.status import Finding, FunctionStatus, Severity, Status, Verdict
from kernelcheck.core.targets import TargetBuild
from kernelcheck.install import apply as installer
from kernelcheck.install import expected, plan_types, sources, txn, writable
from kernelcheck.install import plan as plan_mod
from kernelcheck.report.model import Before, ErrorReport, Installed, Prediction, Report, read_report
from kernelcheck.report.progress import working
from kernelcheck.report.sections import EnvironmentView
from kernelcheck.report.text import render_doctor_after, render_install, render_install_plan


@dataclasses.dataclass(frozen=True)
class Request:
    model: str
    mode: str = "train"
    dry_run: bool = False
    wheelhouse: str | None = None
    arch: str | None = None
    source: str = "auto"
    allow_change: tuple[str, ...] = ()
    with_packages: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()  # distributions, optionally ==version
    offline: bool = False
    target: str | None = None
    sdist: str | None = None
    jobs: int | None = None
    fixes: bool = True  # train mode: additive fixes installed by default
    without: tuple[str, ...] = ()
    build: TargetBuild = TargetBuild()  # --torch/--cuda/--python: plan for another machine's build (dry run only)
    expect_plan: str | None = None  # --expect-plan FILE: a dry run's JSON whose wheel hashes must still hold


def validate(req: Request, m: matrix.Matrix) -> tuple[tuple[str, ...], dict[str, str]]:
    """install's own usage rules (commands/install.py `check` adds --mode, --source and the model): --allow-change,
    --sdist, the folders, --torch/--cuda without --dry-run; the target GPUs and the pinned versions of --package."""
    for a in req.allow_change:
        if a not in plan_types.PINNED:
            raise BadInput(f"--allow-change takes torch, triton or transformers (the packages kernelcheck pins), "
                           f"not '{a}'. Other packages need no permission.")
    if req.sdist:
        _validate_sdist(req.sdist)
    _validate_paths(req)
    if req.build.given and not req.dry_run:
        raise BadInput("--torch/--cuda/--python plan for another machine's torch build, which is not installed here: "
                       "use them with --dry-run (the plan, and the wheels it would take, checked here). Install on "
                       "the target machine, or in the image's build stage, without them.")
    arches = tuple(g.capability.dotted for g in targets.parse_arch(req.arch, m=m)) if req.arch else ()
    return arches, _package_versions(req.packages, m)


def _validate_sdist(sdist: str) -> None:
    """--sdist must be an existing .tar.gz source distribution."""
    p = Path(sdist)
    if not p.is_file():
        raise BadInput(f"--sdist {sdist} does not exist. Download it with `pip download --no-deps "
                       "--no-binary :all: --no-build-isolation causal-conv1d==1.7.0 -d DIR`.")
    if not p.name.endswith(".tar.gz"):
        raise BadInput(f"--sdist {sdist} is not a .tar.gz source distribution.")


def _package_versions(packages: tuple[str, ...] | list[str], m: matrix.Matrix) -> dict[str, str]:
    """{distribution: pinned version} of the --package specs; an unknown kernel package is bad input."""
    versions: dict[str, str] = {}
    for spec in packages:
        name, _, ver = spec.partition("==")
        dist = str(canonicalize_name(name))
        if m.package_of_distribution(dist) is None:
            known = sorted({d for p in m.packages.values() for d in p.distributions})
            raise BadInput(f"--package {spec}: unknown kernel package. Known: {', '.join(known)}.")
        if ver:
            versions[dist] = ver
    return versions


def _validate_paths(req: Request) -> None:
    """--wheelhouse must be an existing, readable folder (a typo is never created, not even by --dry-run);
    --target must be writable (or creatable) before anything is planned."""
    if req.wheelhouse:
        wh = Path(req.wheelhouse)
        if not wh.exists():
            raise BadInput(f"--wheelhouse {req.wheelhouse} does not exist. Check the path (kernelcheck does not "
                           "create a wheelhouse you name), or leave --wheelhouse out to use the default "
                           f"{sources.default_wheelhouse()}.")
        if not wh.is_dir():
            raise BadInput(f"--wheelhouse {req.wheelhouse} is a file, not a folder.")
        if str(wh.resolve()).startswith(("/proc/", "/sys/", "/dev/")) or not os.access(wh, os.R_OK | os.X_OK):
            raise BadInput(f"--wheelhouse {req.wheelhouse} is not a readable folder of wheels.")
    if req.target and not req.dry_run:
        t = Path(req.target)
        probe = t
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if t.exists() and not t.is_dir():
            raise BadInput(f"--target {req.target} is a file, not a folder.")
        if not os.access(probe, os.W_OK) or str(probe.resolve()).startswith(("/proc", "/sys")):
            raise BadInput(f"--target {req.target} is not writable ({probe} is read-only for this user): pick a "
                           "folder you can write, e.g. --target /tmp/site, and put it on PYTHONPATH.")


@contextlib.contextmanager
def _target_on_path(target: str | None) -> Iterator[None]:
    """--target DIR first on sys.path while the install command runs, so its probes and the doctor before it see
    what DIR already holds; sys.path is as it was afterwards (a library caller's stays its own)."""
    entry = str(Path(target).resolve()) if target else None
    if entry is None or entry in [str(Path(p).resolve()) for p in sys.path if p]:
        yield
        return
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _probe(arches: tuple[str, ...], *, m: matrix.Matrix) -> tuple[environment.Environment, str]:
    env = environment.probe(m=m)
    if arches and not env.gpus:
        env = dataclasses.replace(env, gpus=tuple(environment.Gpu(f"--arch {a}", targets.Capability.parse(a), i)
                                                  for i, a in enumerate(arches)), gpu_source="override")
        return env, "--arch"
    if arches:
        return env, "--arch"
    return env, "gpu" if env.gpus else "none"


def _needs(report: Report, versions: dict[str, str], only: tuple[str, ...],
           m: matrix.Matrix) -> tuple[tuple[str, ...], frozenset[str]]:
    pkgs = list(report.needs.packages) if report.needs else []
    attn = m.attention.get(report.needs.attn_implementation if report.needs else "", "")
    if attn:
        pkgs.append(attn)
    if only:
        infos = [m.package_of_distribution(str(canonicalize_name(s.partition("==")[0]))) for s in only]
        wanted = {i.name for i in infos if i is not None}
        pkgs = [p for p in pkgs if p in wanted] + [p for p in wanted if p not in pkgs]
    bound = frozenset(f.package for f in report.functions if f.status == Status.FAST)
    bound_infos = [m.package_of_distribution(b) for b in bound]
    return tuple(dict.fromkeys(pkgs)), frozenset(i.name for i in bound_infos if i is not None)


def _plan_findings(plan: plan_types.Plan) -> list[Finding]:
    out = []
    for s in plan.steps:
        if s.action == "refuse" or s.action == "blocked":
            out.append(Finding(f"install-{s.action}", Severity.FALLBACK, f"{s.package}: {s.reason}", s.command or None))
        elif s.severity == Severity.BROKEN:
            out.append(Finding("install-predicts-broken", Severity.BROKEN, f"{s.package}: {s.reason}", None))
    return out


@dataclasses.dataclass(frozen=True)
class DoctorRun:
    """The doctor run after an install in a fresh process: its report read back typed (or the error it stopped
    on; None when it printed no JSON), its exit code and stderr."""

    report: Report | ErrorReport | None
    exit_code: int
    stderr: str


def _doctor_after(req: Request) -> DoctorRun:
    """doctor in a fresh process (a package installed now is only bound by a new process)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    paths = ([req.target] if req.target else []) + [root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    cmd = [sys.executable, "-m", "kernelcheck", "doctor", "--model", req.model, "--mode", req.mode, "--json"]
    if req.arch:  # judge the GPUs the install was for, not a build machine that has none
        cmd += ["--arch", req.arch]
    # dies with kernelcheck (core/lifeline.py); SIGINT/SIGTERM held while Popen forks: with a preexec_fn, Python
    # runs its at-fork hooks in this process, where an Interrupted is printed as "Exception ignored" and lost
    with signals.held(reraise=False) as came:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=lifeline.preexec())  # prctl only, no locks taken
    try:
        if came:
            raise Interrupted(came[0])
        out, err = proc.communicate()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        return DoctorRun(None, proc.returncode, err)
    return DoctorRun(read_report(data), proc.returncode, err)


def run(req: Request, echo: Callable[[str], None], as_json: bool, *, m: matrix.Matrix) -> Outcome[Report]:
    """Plan, print, and unless --dry-run carry out; returns the final report and its verdict (the exit code follows).
    `m`: the matrix the whole install decides on (a command's Context.matrix).

    SIGINT/SIGTERM raise Interrupted saying what was left: nothing changed, rolled back (install/apply.py),
    or the install completed before the doctor after it gave a verdict."""
    done: list[installer.Outcome] = []  # the committed install, once there is one
    try:
        with _target_on_path(req.target):
            return _run(req, echo, as_json, done, m)
    except KeyboardInterrupt as exc:
        if done:
            detail = installer._completed_detail(done[0]).replace(
                "run `kernelcheck doctor`", f"run `kernelcheck doctor --model {req.model} --mode {req.mode}`")
            raise Interrupted.of(exc, detail) from None
        if isinstance(exc, Interrupted) and exc.detail:
            raise
        raise Interrupted.of(exc, "stopped before anything was installed: nothing was changed.") from None


def _require_pip(req: Request) -> None:
    if importlib.util.find_spec("pip") is None and req.source != "hub":
        raise BadInput(f"this Python ({sys.executable}) has no pip module (a `uv venv` makes venvs without it), and "
                       "kernelcheck installs, resolves and builds through `python -m pip`. Nothing was planned or "
                       "changed: add pip with `python -m ensurepip` (or `uv pip install pip`), then rerun.")


def _dry_run(report: Report, plan_in: Callable[[Path], plan_types.Plan], wheelhouse: Path,
             before: Report, for_target: bool = False) -> Outcome[Report]:
    """Changes nothing: wheels pip downloads to inspect go to a temporary folder, removed after."""
    with tempfile.TemporaryDirectory(prefix="kernelcheck-dry-run-") as tmp:
        print(f"kernelcheck install: dry run: wheels downloaded to inspect them go to {tmp} and are removed at "
              f"the end; nothing is written to the wheelhouse {wheelhouse} or the environment", file=sys.stderr,
              flush=True)
        from kernelcheck.install import dry_commands

        plan = dry_commands.portable(plan_in(Path(tmp)), Path(tmp), wheelhouse, for_target)
        return _finish_plan(report, plan, executed=False, before=before)


def _run(req: Request, echo: Callable[[str], None], as_json: bool,
         done: list[installer.Outcome], m: matrix.Matrix) -> Outcome[Report]:
    from kernelcheck.doctor.run import doctor as run_doctor

    arches, versions = validate(req, m)
    _require_pip(req)
    with working("kernelcheck install: probing torch, the GPUs and the kernel packages", announce=True):
        env, origin = _probe(arches, m=m)
    planned_for = None
    if req.build.given:
        from kernelcheck.install import target_env

        env, planned_for = target_env.for_target(env, req.build, target_env.triton_pins(m=m))
    with working("kernelcheck install: the doctor check before planning", announce=True):
        before = run_doctor(req.model, req.mode, env, m=m)
    packages, bound = _needs(before, versions, req.packages, m)
    wheelhouse = Path(req.wheelhouse) if req.wheelhouse else sources.default_wheelhouse()
    offline = req.offline or settings.offline()
    opts = plan_types.Options(
        mode=req.mode, source=req.source, arches=arches or tuple(c.dotted for c in env.capabilities),
        arch_origin=origin,
        allow_change=frozenset(req.allow_change), with_packages=req.with_packages, offline=offline,
        model=req.model, wheelhouse=str(wheelhouse), target=req.target, fixes=req.fixes,
        without=tuple(req.without))
    report = Report("install", EnvironmentView.of(env), before.model, req.mode)
    if planned_for is not None:
        report.findings.append(planned_for)
    report.before = Before(before.verdict, {f.name: f.status for f in before.functions})
    progress = (lambda s: print(s, file=sys.stderr, flush=True)) if as_json else echo
    if req.source == "hub":
        return _install_from_hub(req, env, wheelhouse, offline, report, progress, m=m)

    def plan_now(now: environment.Environment, downloads: Path | None = None) -> plan_types.Plan:
        sdist = Path(req.sdist) if req.sdist else None
        found = sources.gather(now, packages, opts, wheelhouse, sdist, versions, downloads, m=m)
        return plan_mod.make_plan(now, packages, opts, found, bound)

    if req.dry_run:
        return _dry_run(report, lambda tmp: plan_now(env, tmp), wheelhouse, before, req.build.given)
    writable.wheelhouse(wheelhouse, named=bool(req.wheelhouse))  # read-only HOME: exit 2 with the way out
    writable.target(req.target)
    with installer.locked(installer.lock_paths(wheelhouse, req.target), progress):
        txn.repair(req.target, progress)  # an install interrupted earlier (even by SIGKILL) is undone
        # re-probe after the lock: a concurrent install may have installed what we need meanwhile
        importlib.invalidate_caches()
        env, _ = _probe(arches, m=m)
        plan = expected.apply(plan_now(env), req.expect_plan)  # --expect-plan: the dry run's hashes
        report.plan = list(plan.steps)
        if not as_json:  # the plan, before anything runs
            echo(render_install_plan(report))
        if plan.blocked:
            return _finish_plan(report, plan, executed=False, before=before)
        try:
            outcome = installer.execute(plan, env, wheelhouse, req.target, frozenset(req.allow_change),
                                        log=progress, jobs=req.jobs, offline=offline, m=m)
            done.append(outcome)
        except InstallFailed as exc:  # BuildFailed is one
            report.plan = list(plan.steps)
            report.findings.append(Finding("install-failed", Severity.BROKEN, exc.message,
                                           "fix the cause above and rerun; the environment was not changed"))
            return Outcome(report, Verdict.BROKEN)
        if not outcome.installed:  # every package already in place: the doctor above is the verdict, said once
            report.installed = Installed([], outcome.manifest, round(outcome.seconds, 1))
            return _unchanged(report, before, plan, origin)
    return _after_install(req, report, plan, outcome, opts, origin, echo, progress, as_json)


def _after_install(req: Request, report: Report, plan: plan_types.Plan, outcome: installer.Outcome,
                   opts: plan_types.Options, origin: str, echo: Callable[[str], None],
                   progress: Callable[[str], None], as_json: bool) -> Outcome[Report]:
    """What was installed, then doctor in a fresh process; its verdict is the command's."""
    report.plan = list(plan.steps)
    report.installed = Installed(outcome.installed, outcome.manifest, round(outcome.seconds, 1))
    for e in outcome.installed:
        progress(f"installed {e['distribution']} {e['version']} from {e['source']}"
                 + (f" (GPU code {', '.join(e['so_arches'])})" if e.get("so_arches") else "")
                 + f", sha256 {e['sha256'][:16]}...")
    if outcome.manifest:
        progress(f"manifest: {outcome.manifest}")
    progress("doctor after install (fresh process):")
    run_after = _doctor_after(req)
    if not as_json:
        text = render_doctor_after(run_after.report, run_after.exit_code, run_after.stderr)
        echo("\n".join("  " + ln for ln in text.splitlines()))
    report.installed = Installed(outcome.installed, outcome.manifest, round(outcome.seconds, 1), run_after.report,
                                 has_doctor_after=True)
    after = run_after.report
    if isinstance(after, Report) and after.environment is not None:
        report.environment = after.environment  # what is installed now, not before
    # The doctor block printed above is part of this command's output: its functions and findings are the
    # report's (none when it stopped on an error), and the exit code is the worst verdict printed (the doctor
    # after install, and with --arch also the plan's prediction for GPUs that are not here), never READY under a
    # FALLBACK block.
    if after is not None:
        report.functions = list(after.functions) if isinstance(after, Report) else []
        report.findings = [*(after.findings if isinstance(after, Report) else []), *_plan_findings(plan)]
    else:
        report.findings.extend(_plan_findings(plan))
        report.findings.append(Finding("install-unverified", Severity.FALLBACK, "doctor did not run after the install, "
                                       "so nothing shows that the fast path runs now", "kernelcheck doctor --model "
                                       f"{req.model} --mode {req.mode}"))
    if origin == "--arch":
        report.findings.append(Finding("install-for-arch", Severity.INFO,
                                       f"installed for {', '.join(opts.arches)} given by --arch; doctor above "
                                       "judged those GPUs (--arch), not this machine's"))
        return Outcome(report, decide.worst(report.verdict, plan.predicted))
    return reported(report)


def _unchanged(report: Report, before: Report, plan: plan_types.Plan, origin: str) -> Outcome[Report]:
    """An install whose plan changed nothing: the doctor run before it is still true (no process to re-run,
    no second copy of the report), and the report says there was nothing to change."""
    report.functions = list(before.functions)
    report.findings = [*before.findings, *_plan_findings(plan),
                       Finding("install-nothing-to-change", Severity.INFO,
                               "nothing to change: every package the plan needs is already installed as planned, "
                               "so nothing was installed and the statuses are the doctor's before the plan")]
    if origin == "--arch":
        return Outcome(report, decide.worst(report.verdict, plan.predicted))
    return reported(report)


def _install_from_hub(req: Request, env: environment.Environment, wheelhouse: Path, offline: bool,
                      report: Report, progress: Callable[[str], None], *, m: matrix.Matrix) -> Outcome[Report]:
    """--source hub: pre-download the Kernel Hub builds kernels would choose here into the HF cache and
    write a lock in kernels' own format next to the wheelhouse, so offline jobs load exactly those builds."""
    from kernelcheck.hub import prefetch
    from kernelcheck.integrations import kernels_prefetch as hub

    lock = wheelhouse / "kernels.lock"
    if not req.dry_run:
        writable.wheelhouse(wheelhouse, named=bool(req.wheelhouse))
    # --arch means "for a GPU image built here": resolve the CUDA builds even on a machine without one
    steps = hub.prefetch_model(req.model, mode=req.mode, device="cuda" if req.arch else None, lock_path=lock,
                               dry_run=req.dry_run, env=env, progress=progress, offline_only=offline, m=m)
    report.plan = steps
    lock_written = str(lock) if not req.dry_run and any(s.action != "skip" for s in steps) else None
    # A build that could not be fetched is a job that keeps (or falls back to) the torch path: exit 3, as
    # `kernelcheck hub --prefetch` says, with the same findings (hub/prefetch.py).
    missed = prefetch.findings(steps)
    report.findings.extend(missed)
    verdict = Verdict.FALLBACK if missed else Verdict.READY
    report.prediction = Prediction(verdict.value, not req.dry_run, lock_written, has_lock=True)
    return Outcome(report, verdict)


def untouched(before: Report, plan: plan_types.Plan) -> list[Finding]:
    """The used functions that are not fast and whose package this plan leaves alone (`--package` chose
    others): the doctor after the install finds them as doctor found them before, so the prediction says so
    too (else a dry run said READY where the install then exited 3). One finding per package."""
    planned = {canonicalize_name(s.package) for s in plan.steps}
    left: dict[str, list[FunctionStatus]] = {}
    for f in before.functions:
        if f.used and f.status != Status.FAST and f.package != "torch" and canonicalize_name(f.package) not in planned:
            left.setdefault(f.package, []).append(f)
    out = []
    for package, fns in left.items():
        worst = Severity.BROKEN if any(f.status == Status.BROKEN for f in fns) else Severity.FALLBACK
        out.append(Finding("install-leaves-package", worst,
                           f"{package} is not part of this install, so {', '.join(f.name for f in fns)} "
                           f"stay{'s' if len(fns) == 1 else ''} {worst}, as doctor found before the install",
                           f"kernelcheck install --model {before.model.query if before.model else 'M'} "
                           f"--package {package} (or without --package: every package the model needs)",
                           None, tuple(f.name for f in fns)))
    return out


def _finish_plan(report: Report, plan: plan_types.Plan, executed: bool, before: Report) -> Outcome[Report]:
    report.plan = list(plan.steps)
    report.findings.extend(_plan_findings(plan))
    left = untouched(before, plan)
    report.findings.extend(left)
    predicted = decide.worst(plan.predicted, decide.verdict([], left))
    report.prediction = Prediction(predicted.value, executed)
    if plan.blocked:
        report.findings.append(Finding("install-stopped", Severity.FALLBACK,
                                       "the plan needs a pinned package changed, so nothing was installed",
                                       "rerun with --allow-change PACKAGE if you accept that change"))
    return Outcome(report, predicted)


def render(outcome: Outcome[Report], dry_run: bool, verbose: bool = True) -> str:
    """Text for people: the plan (a dry run's), findings and the verdict line with the command's exit code."""
    return render_install(outcome.report, outcome.exit_code, dry_run, verbose)


def to_json(outcome: Outcome[Report]) -> str:
    """The report's JSON with the command's verdict and exit code (the doctor after an install, and with --arch
    the worse of it and the plan's prediction)."""
    data: dict[str, Any] = outcome.report.to_json()
    data["verdict"], data["exit_code"] = outcome.verdict, outcome.exit_code
    return jsonout.dumps(data, indent=2, default=str)


__all__ = ["Request", "run", "render", "to_json", "KernelcheckError"]
