"""A printed fix never makes things worse: each fix is checked against the rules before it is printed.

`check` reads the fix's change (core/fix.py `Fix.change`: `pip install A B`, `pip uninstall -y A`), builds the
environment pip would leave
(`after`: the packages installed or removed, a kernel package whose import failed for want of one of them now
importing and bound), evaluates the breakage rules there and decides the verdict with core/decide.py. When that
verdict is worse than the one printed now (CPU with fla-core but no triton: `pip install triton` turns the torch
fallback, exit 3, into fla-cpu-crash, exit 4), the fix is replaced:

1. by the command together with the worsening rule's own install (`pip install triton tilelang` where triton alone
   would hit fla#640 on an H200), when that combination is not worse; else
2. by the same command qualified with where it is safe, read from the worsening rule's conditions that this
   environment holds (`on a machine with an NVIDIA GPU: pip install triton`); else
3. by no fix;

and the reason is added to the message. A fix that is not a pip command (run on a GPU, kernelcheck install) is
printed as it is. Everything here is pure: the environment, the statuses and the findings are passed in.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement

from kernelcheck.core import decide, matrix
from kernelcheck.core import rules as rules_mod
from kernelcheck.core.capability import sm_name
from kernelcheck.core.environment import Environment, PackageState
from kernelcheck.core.fix import Change, Fix, lowest_version, normalized
from kernelcheck.core.status import WORDS, Finding, FunctionStatus, Mode, Severity, Status, Verdict, worst
from kernelcheck.integrations import fla_dispatch

if TYPE_CHECKING:
    from kernelcheck.report.model import Report

@dataclass(frozen=True)
class State:
    """What the printed verdict was decided from."""

    env: Environment
    mode: str
    functions: tuple[FunctionStatus, ...]
    findings: tuple[Finding, ...]
    bound: frozenset[str]  # kernel packages bound for a used function (every importable one without a model)
    model: str = ""
    built_nvcc: Mapping[str, str] | None = None
    pinned_triton: str | None = None  # the triton version torch's metadata pins (what `pip install triton` gets)
    any_model: bool = False  # no model named: a package that imports would be bound by some model
    cuda: bool | None = None  # the verdict is for a CUDA device (rules.Facts.cuda); None: a GPU here


@dataclass(frozen=True)
class Checked:
    fix: Fix | None  # what to print
    note: str = ""  # why it differs from the rule's fix ("" when kept)


def _import_name(dist: str, m: matrix.Matrix) -> str:
    for pkg in m.packages.values():
        if dist in (normalized(d) for d in pkg.distributions):
            return pkg.name
    return dist.replace("-", "_")


def after(change: Change, state: State, m: matrix.Matrix,
          triton_version: str | None = None) -> tuple[Environment, frozenset[str]]:
    """The environment and the bound packages once `change` is applied (pure). `triton_version`: the triton an
    unversioned `pip install triton` gets, where torch pins none (triton_versions)."""
    env, bound = state.env, set(state.bound)
    packages, present = dict(env.packages), dict(env.present)
    triton = env.triton
    for dist, version in change.install:
        name = _import_name(dist, m)
        if name == "triton":
            triton = version or state.pinned_triton or triton_version or triton or "unknown"
        elif name in m.packages:
            old = packages.get(name)
            packages[name] = PackageState(name, True, version or (old.version if old else None) or "unknown", dist,
                                          True, None)
        present[name] = True
    for dist in change.uninstall:
        name = _import_name(dist, m)
        if name == "triton":
            triton = None
        packages.pop(name, None)
        present[name] = False
        bound.discard(name)
    added = {_import_name(d, m) for d, _ in change.install}
    for name, st in list(packages.items()):  # an import that failed for want of an installed module now works
        missing = re.search(r"No module named '([\w.]+)'", st.error or "")
        if st.installed and not st.imports and missing and missing.group(1).split(".")[0] in added:
            packages[name] = replace(st, imports=True, error=None)
    for name, st in packages.items():
        before = env.packages.get(name)
        newly = st.installed and st.imports and not (before and before.installed and before.imports)
        if newly and (state.any_model or _backs_a_used_function(name, state, m)):
            bound.add(name)
    return replace(env, packages=packages, present=present, triton=triton), frozenset(bound)


def _backs_a_used_function(name: str, state: State, m: matrix.Matrix) -> bool:
    dists = set(m.packages[name].distributions) if name in m.packages else {name}
    return any(fs.used and fs.package in dists for fs in state.functions)


def triton_versions(change: Change, state: State, m: matrix.Matrix) -> list[str | None]:
    """The triton versions `change` may install: one (None: as `after` decides) unless it installs triton with no
    version while this torch pins none (a CPU build, or a prediction for another machine, whose torch pins its own).
    Then every version the rules tell apart (each bound of a `triton` condition in breakages.toml) may be the one:
    the fix is judged by the worst of them."""
    if state.pinned_triton or not any(_import_name(d, m) == "triton" and v is None for d, v in change.install):
        return [None]
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    found: set[str] = set()
    for b in m.breakages:
        try:
            spec = SpecifierSet(str(b.when.get("triton", "")))
        except InvalidSpecifier:
            continue
        found.update(s.version for s in spec if s.operator in (">=", "==", "<=", "~=") and "*" not in s.version)
    return [None, *sorted(found, key=lambda v: tuple(int(x) if x.isdigit() else 0 for x in v.split(".")))]


def verdict_after(change: Change, state: State, m: matrix.Matrix, fixed: str | None = None
                  ) -> tuple[Verdict, list[rules_mod.RuleHit]]:
    """The verdict doctor would print once `change` is applied, and the certain rule hits there (for an unpinned
    triton, the worst over the versions it may be: triton_versions).

    A function whose package becomes bound is fast (unsupported without a GPU), one whose package is removed falls
    back; then the rules of the new environment raise them as they do in doctor. `fixed`: the finding the fix is
    for, which it no longer prints."""
    outcomes = [_verdict_after(change, state, m, fixed, t) for t in triton_versions(change, state, m)]
    bad = worst([v for v, _ in outcomes])
    return next(o for o in outcomes if o[0] == bad)


def _verdict_after(change: Change, state: State, m: matrix.Matrix, fixed: str | None,
                   triton_version: str | None) -> tuple[Verdict, list[rules_mod.RuleHit]]:
    env, bound = after(change, state, m, triton_version)
    facts = rules_mod.Facts(env=env, mode=state.mode, bound=bound, built_nvcc=dict(state.built_nvcc or {}),
                            model=state.model, fla_dispatch=functools.partial(fla_dispatch.backends, m=m),
                            cuda=state.cuda)
    hits = [h for h in rules_mod.evaluate(facts, m) if h.certain]
    removed = set(change.uninstall)
    functions = []
    for fs in state.functions:
        name = _import_name(normalized(fs.package), m)
        if name in bound and name not in state.bound and fs.status != Status.FAST:
            fs = decide.assume(fs, Status.FAST if env.cuda_gpu and state.cuda is not False else Status.UNSUPPORTED)
        elif normalized(fs.package) in removed:
            fs = decide.assume(fs, Status.FALLBACK)
        functions.append(fs)
    evidence = [decide.RuleEvidence(h.rule.id, h.rule.severity, h.rule.title, h.message, h.fix, h.rule.functions)
                for h in hits]
    decided = decide.decide_all(functions, rules=evidence)
    rule_ids = {b.id for b in m.breakages}
    findings = [f for f in state.findings if f.id not in rule_ids and f.id != fixed]
    findings += [Finding(h.rule.id, h.rule.severity, h.message) for h in hits]
    return decide.verdict(decided, findings), hits


def _worse(a: Verdict, b: Verdict) -> bool:
    return worst([a, b]) != b


def check(fix: Fix | None, state: State, m: matrix.Matrix, fixed: str | None = None) -> Checked:
    """`fix` as it may be printed in `state`: kept, or replaced (with the reason) where it would make things worse
    (what it does is its `change`; a fix that is no pip command is kept as it is)."""
    change = fix.change if fix is not None else None
    if change is None:
        return Checked(fix)
    now = decide.verdict(state.functions, state.findings)
    then, hits = verdict_after(change, state, m, fixed)
    if not _worse(then, now):
        return Checked(fix)
    culprit = next((h for h in hits if _worse(_severity_verdict(h.rule.severity), now)), hits[0] if hits else None)
    why = (f"`{change.command}` alone would turn {WORDS[now]} into {WORDS[then]} here"
           + (f" ({culprit.rule.id}: {culprit.rule.title})" if culprit else ""))
    if culprit is not None:
        combined = _combine(change, culprit, state, m, fixed, now)
        if combined is not None:
            return Checked(combined, f"{why}; {combined} avoids it.")
        where = where_safe(culprit.rule, state, m=m)
        if where:
            return Checked(Fix(f"{where}: {fix}"), f"{why}.")
    return Checked(None, f"{why}, so no fix is printed for this machine.")


def _severity_verdict(severity: Severity) -> Verdict:
    return decide.verdict((), (Finding("-", severity, ""),))


def _combine(change: Change, culprit: rules_mod.RuleHit, state: State, m: matrix.Matrix, fixed: str | None,
             now: Verdict) -> Fix | None:
    """The command plus the worsening rule's own install, when that is an install too and is not worse."""
    extra = culprit.fix.change
    if extra is None or extra.uninstall or not extra.install:
        extra = _remedy_install(culprit)  # the rule's fix is prose: its `remedies` data says what it adds
    if extra is None or extra.uninstall or not extra.install:
        return None
    merged = Change(f"{change.command} {' '.join(shlex.quote(w) for w in shlex.split(extra.command)[2:])}",
                    install=change.install + extra.install)
    then, _ = verdict_after(merged, state, m, fixed)
    return None if _worse(then, now) else Fix(merged.command)


def _remedy_install(culprit: rules_mod.RuleHit) -> Change | None:
    """`pip install` of the packages the rule's remedies add (kind "add"), as a Change; None when it adds none."""
    specs = [r["spec"] for r in culprit.rule.remedies if r.get("kind") == "add" and r.get("spec")]
    return Fix("pip install " + " ".join(specs)).change if specs else None


_CAP = ("gpu_capability", "gpu_capability_min", "gpu_capability_max")
_CHANGEABLE = ("bound", "absent", "requirement_unmet", "built_nvcc")  # what a fix itself may change


def where_safe(rule: matrix.Breakage, state: State, *, m: matrix.Matrix) -> str:
    """Where `rule` does not apply, from its conditions that this environment holds now (the fix cannot change
    those): "on a machine with an NVIDIA GPU, or with transformers outside >=5.15,<5.25"."""
    facts = rules_mod.Facts(env=state.env, mode=state.mode, bound=state.bound, model=state.model,
                            fla_dispatch=functools.partial(fla_dispatch.backends, m=m), cuda=state.cuda)
    parts = []
    for key, want in rule.when.items():
        if key in _CHANGEABLE or rules_mod.holds(key, want, facts) is not True:
            continue
        parts.append(_condition_words(key, want, state.mode))
    return ", or ".join(p for p in parts if p)


def _condition_words(key: str, want: Any, mode: str) -> str:
    if key == "cuda_gpu":
        return "on a machine with an NVIDIA GPU" if want is False else "on a machine without a GPU"
    if key == "mode":
        return f"in {'infer' if mode == Mode.TRAIN else 'train'} mode"
    if key in _CAP:
        shown = ", ".join(sm_name(c) for c in (want if isinstance(want, list) else [want]))
        return {"gpu_capability": f"on GPUs other than {shown}", "gpu_capability_min": f"on GPUs below {shown}",
                "gpu_capability_max": f"on GPUs above {shown}"}[key]
    return f"with {key} outside {want}"


def guard(state: State, m: matrix.Matrix) -> tuple[list[Finding], dict[str, decide.CheckedFix]]:
    """Every fix `state` prints, checked: the findings as they may be printed, and the functions' checked fixes."""
    findings = []
    for f in state.findings:
        c = check(Fix.of(f.fix), state, m, fixed=f.id)
        findings.append(f if c.fix == f.fix else Finding(f.id, f.severity, f"{f.message}. {c.note}", c.fix,
                                                         f.reference, f.functions, f.decorators))
    fixes: dict[str, decide.CheckedFix] = {}
    for fs in state.functions:
        c = check(Fix.of(fs.fix), state, m)
        if c.fix != fs.fix:
            fixes[fs.name] = decide.CheckedFix(fs.fix, c.fix, c.note)
    return findings, fixes


def printed_fixes(functions: Iterable[FunctionStatus], findings: Sequence[Finding]) -> list[Fix]:
    """Every fix a report prints (for the property test)."""
    return [x for x in [*(Fix.of(fs.fix) for fs in functions), *(Fix.of(f.fix) for f in findings)] if x]


def pinned_triton() -> str | None:
    """The triton version the installed torch pins (its Requires-Dist `triton==X`), None when it pins none."""
    from importlib import metadata

    try:
        reqs = metadata.requires("torch") or []
    except metadata.PackageNotFoundError:
        return None
    for line in reqs:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if normalized(req.name) == "triton":
            return lowest_version(req)
    return None


def apply_to(report: Report, env: Environment, mode: str, query: str | None, bound: frozenset[str],
             built_nvcc: Mapping[str, str], m: matrix.Matrix) -> None:
    """doctor's step: the report's findings and functions with every fix checked against the matrix `m` (the edge:
    reads torch's pin)."""
    if query is None:  # no model: any importable kernel package may be bound by the job's model
        bound = frozenset(n for n, st in env.packages.items() if st.installed and st.imports)
    state = State(env, mode, tuple(report.functions), tuple(report.findings), bound, query or "",
                  built_nvcc, pinned_triton(), any_model=query is None,
                  cuda=report.device.type == "cuda" if report.device is not None else None)
    findings, fixes = guard(state, m)
    report.findings = findings
    report.functions = [decide.decide(fs, checked_fix=fixes.get(fs.name)) for fs in report.functions]
