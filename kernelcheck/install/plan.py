"""The install plan: pure, from the environment, the model's needs, the matrix and the candidates found.

Nothing here touches pip, the network or the disk: `sources.gather` collects the candidates (wheels in
the wheelhouse, release-wheel reachability, a PyPI wheel's metadata, sdists), and `make_plan` decides.
Every step says what it does and why, and lists every rejected candidate with its reason, so "why
did it not use my wheel?" is answered before anything is installed.

Actions: keep (already right) · install (a wheel) · build (from an sdist, then install) ·
offer (a fix you may add: `--with PKG`) · refuse (cannot be done here; the torch path stays) ·
blocked (would change torch/triton/transformers: needs `--allow-change`).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from kernelcheck.core import matrix
from kernelcheck.core import rules as rules_mod
from kernelcheck.core.environment import Environment, PackageState, dist_version
from kernelcheck.core.plan_step import Rejected, RejectKind, Role, Step, StepKind
from kernelcheck.core.status import Mode, Severity
from kernelcheck.install import wheels
from kernelcheck.install.plan_types import (
    PINNED,
    Candidates,
    Options,
    Plan,
    pip_cmd,
    version_text,
    wheel_fit,
)
from kernelcheck.integrations import fla_dispatch


def _pin_violation(req: Requirement, env: Environment) -> str | None:
    """Why `req` would change a pinned package (torch/triton/transformers), or None if it is satisfied."""
    name = canonicalize_name(req.name)
    if name not in PINNED:
        return None
    have = env.version_of(name)
    if have is None:
        return f"needs {req} but {name} is not installed"
    if req.specifier and not req.specifier.contains(rules_mod.base_version(have) or have, prereleases=True):
        return f"needs {req}, installed {name} is {have}"
    return None


def _hypothetical(env: Environment, import_name: str, dist: str, version: str) -> Environment:
    """The environment as it would be with `dist version` installed and importable."""
    pkgs = dict(env.packages)
    pkgs[import_name] = PackageState(import_name, True, version, dist, True, None)
    return dataclasses.replace(env, packages=pkgs)


def _breakage_hits(env: Environment, import_name: str, opts: Options,
                   bound: frozenset[str]) -> list[rules_mod.RuleHit]:
    facts = rules_mod.Facts(env=env, mode=opts.mode, bound=bound | {import_name}, model=opts.model,
                            fla_dispatch=functools.partial(fla_dispatch.backends, m=opts.matrix))
    return [h for h in rules_mod.evaluate(facts, opts.matrix) if h.certain and h.rule.severity == Severity.BROKEN
            and import_name in _rule_packages(h.rule, opts.matrix)]


def _rule_packages(rule: matrix.Breakage, m: matrix.Matrix) -> set[str]:
    return {m.functions[f].package for f in rule.functions if f in m.functions}


def _cpu_crash(env: Environment, pkg: matrix.PackageInfo, opts: Options) -> str:
    """", and with transformers X an installed fla makes the forward crash ..." where the installed transformers is
    inside fla-cpu-crash's window (matrix/breakages.toml; 5.25 added the device check), else nothing."""
    from packaging.specifiers import SpecifierSet

    for b in opts.matrix.table("breakages.toml").get("breakage", []):
        window = b.get("when", {}).get("transformers")
        if b.get("id") == "fla-cpu-crash" and pkg.name == "fla" and window and env.transformers \
                and SpecifierSet(window).contains(env.transformers, prereleases=True):
            return (f", and with transformers {env.transformers} an installed fla makes the forward crash on CPU "
                    "(fla-cpu-crash)")
    return ""


def _plan_pure(pkg: matrix.PackageInfo, env: Environment, opts: Options, cands: Candidates,
               bound: frozenset[str], found: dict[str, Candidates]) -> list[Step]:
    dist = pkg.install_distribution
    st = env.packages.get(pkg.name)
    rejected: list[Rejected] = []
    for other in pkg.distributions:
        if other != dist:
            rejected.append(Rejected(other, "not needed: " + (pkg.skip_reason or
                                                              f"transformers imports only what {dist} ships"),
                                     kind=RejectKind.NOT_NEEDED))
    if env.torch is None or not env.torch.cuda:
        return [Step(dist, "refuse", "-", dist, f"torch {env.torch.version if env.torch else '(absent)'} is a "
                     f"CPU build: {pkg.title}'s Triton kernels need a CUDA torch and a GPU{_cpu_crash(env, pkg, opts)}",
                     rejected=tuple(rejected), import_name=pkg.name, severity=Severity.FALLBACK,
                     kind=StepKind.CPU_TORCH)]
    if st and st.installed and st.imports and st.distribution == dist and opts.source in ("auto",):
        bad = [r for r in _reqs_of_installed(found, dist, st.version) if _pin_violation(r, env)]
        if not bad:
            hits = _breakage_hits(env, pkg.name, opts, bound)
            fixes = _remedies(hits, env, opts, found)
            more, sev, after, left = _after_fixes(env, pkg.name, opts, bound, hits, fixes)
            why = "; ".join([f"{dist} {st.version} is installed and imports", *more])
            return [Step(dist, "keep", "installed", f"{dist}=={st.version}", why, rejected=tuple(rejected),
                         import_name=pkg.name, severity=sev, rules=left, kind=StepKind.INSTALLED)] + fixes + \
                _new_remedies(after, fixes, env, opts, found)
    pool = _pure_pool(dist, opts, cands, rejected)
    picked = _choose_pure(pkg, dist, env, opts, bound, pool, rejected)
    if picked is None:
        return [_no_pure_candidate(dist, opts, rejected, pkg.name)]
    return _pure_steps(pkg, dist, env, opts, bound, found, picked, rejected)


def _pure_pool(dist: str, opts: Options, cands: Candidates,
               rejected: list[Rejected]) -> list[tuple[wheels.WheelInfo, str]]:
    pool: list[tuple[wheels.WheelInfo, str]] = []
    # --source release/build name how compiled packages are obtained; a pure-Python package has no
    # release wheel or build, so it still comes from the wheelhouse or PyPI.
    source = "auto" if opts.source in ("release", "build") else opts.source
    if source in ("auto", "wheelhouse"):
        pool += [(w, "wheelhouse") for w in cands.wheels if w.name.name == dist]
    elif any(w.name.name == dist for w in cands.wheels):
        rejected.append(Rejected("wheelhouse", f"--source {opts.source}", kind=RejectKind.SOURCE_EXCLUDED))
    if source in ("auto", "pypi"):
        if cands.pypi_wheel is not None:
            pool.append((cands.pypi_wheel, "pypi"))
        elif cands.pypi_error:
            rejected.append(Rejected(f"pypi:{dist}", cands.pypi_error, kind=RejectKind.PYPI_UNAVAILABLE))
    if opts.source == "hub":
        rejected.append(Rejected("hub", "Kernel Hub builds are loaded by transformers' `kernels` integration, "
                                 "not installed with pip", kind=RejectKind.HUB_NOT_PIP))
    pool.sort(key=lambda p: (version_text(p[0].name.version) or Version("0"), p[1] == "wheelhouse"), reverse=True)
    return pool


def wheel_unfit(w: wheels.WheelInfo, env: Environment, label: str = "") -> Rejected | None:
    """Why a (pure or dependency) wheel cannot be installed here: its file, or its tags (packaging); the rejection
    names `label` (default: the file name)."""
    if w.error:
        return Rejected(label or w.name.filename, w.error, kind=RejectKind.WHEEL_FILE)
    why = wheels.tag_decision(w.name.filename, env.python_tag, env.platform)
    return Rejected(label or w.name.filename, why, kind=RejectKind.WHEEL_TAGS) if why else None


@dataclass
class _Pick:
    wheel: wheels.WheelInfo
    source: str
    hits: list[rules_mod.RuleHit]
    deps: list[Requirement]
    needs_change: list[str] = field(default_factory=list)


def _choose_pure(pkg: matrix.PackageInfo, dist: str, env: Environment, opts: Options, bound: frozenset[str],
                 pool: list[tuple[wheels.WheelInfo, str]], rejected: list[Rejected]) -> _Pick | None:
    """The newest candidate whose tags fit, that changes no pinned package and avoids a breakage if any can."""
    fallback_choice: _Pick | None = None
    needs_change: list[str] = []
    usable = [(w, src) for w, src in pool if not wheel_unfit(w, env)]
    for w, src in pool:
        label = f"{w.name.filename} ({src})"
        unfit = wheel_unfit(w, env, label)
        if unfit:
            rejected.append(unfit)
            continue
        reqs = wheels.requirements(w, extras=("cuda",))
        viol = [v for r in reqs if canonicalize_name(r.name) not in opts.allow_change
                and (v := _pin_violation(r, env))]
        if viol:
            rejected.append(Rejected(label, "; ".join(viol) + " (torch, triton and transformers are never changed "
                                     "without --allow-change)", kind=RejectKind.PINNED_CHANGE))
            needs_change.extend(viol)
            continue
        hits = _breakage_hits(_hypothetical(env, pkg.name, dist, w.name.version), pkg.name, opts, bound)
        if hits and fallback_choice is None:
            fallback_choice = _Pick(w, src, hits, reqs)
        if hits and any(_avoids(hits[0], pkg.name, other.name.version, env, opts, bound, dist)
                        for other, _ in usable if other is not w):
            rejected.append(Rejected(label, f"{hits[0].rule.title}; another candidate avoids it",
                                     kind=RejectKind.BREAKAGE))
            continue
        return _Pick(w, src, hits, reqs)
    if fallback_choice is not None:  # every candidate has the breakage: take the newest
        label = f"{fallback_choice.wheel.name.filename} ({fallback_choice.source})"
        rejected[:] = [r for r in rejected if r.candidate != label]
        return fallback_choice
    if needs_change:
        return _Pick(pool[0][0], "-", [], [], needs_change)
    return None


def _no_pure_candidate(dist: str, opts: Options, rejected: list[Rejected], import_name: str) -> Step:
    where = "the wheelhouse" + ("" if opts.offline else " or PyPI")
    return Step(dist, "refuse", "-", dist, f"no usable {dist} wheel in {where}: add one with "
                f"`pip download --no-deps {dist} -d {opts.wheelhouse or 'WHEELHOUSE'}`",
                rejected=tuple(rejected), import_name=import_name, severity=Severity.FALLBACK,
                kind=StepKind.NO_CANDIDATE)


def _pure_steps(pkg: matrix.PackageInfo, dist: str, env: Environment, opts: Options, bound: frozenset[str],
                found: dict[str, Candidates], pick: _Pick, rejected: list[Rejected]) -> list[Step]:
    if pick.needs_change:
        return [Step(dist, "blocked", "-", dist, f"every {dist} candidate would change a pinned package: "
                     f"{pick.needs_change[0]}. Pass --allow-change with that package to accept it.",
                     rejected=tuple(rejected), import_name=pkg.name, severity=Severity.FALLBACK,
                     kind=StepKind.PINNED_CHANGE)]
    w = pick.wheel
    steps = [_dep_step(r, env, opts, found) for r in pick.deps
             if canonicalize_name(r.name) not in PINNED and canonicalize_name(r.name) != dist]
    missing = [d.package for d in steps if d.action == "refuse"]
    if missing:
        return steps + [Step(dist, "refuse", "-", f"{dist}=={w.name.version}",
                             f"its dependency {', '.join(missing)} cannot be installed (see above), and {dist} "
                             "does not import without it", rejected=tuple(rejected), import_name=pkg.name,
                             severity=Severity.FALLBACK, kind=StepKind.DEPENDENCY_REFUSED)]
    reqs = ", ".join(r.name + str(r.specifier) for r in pick.deps) or "none"
    reasons = [f"newest compatible {dist}: its tags fit {env.python_tag} on {env.platform} and its requirements "
               f"({reqs}) hold with torch {env.torch.version if env.torch else '?'}, triton {env.triton or 'absent'}, "
               f"transformers {env.transformers or 'absent'}"]
    fixes = _remedies(pick.hits, env, opts, found)
    more, sev, after, left = _after_fixes(_hypothetical(env, pkg.name, dist, w.name.version), pkg.name, opts, bound,
                                    pick.hits, fixes)
    reasons.extend(more)
    fixes.extend(_new_remedies(after, fixes, env, opts, found))
    steps.append(Step(dist, "install", pick.source, f"{dist}=={w.name.version}", "; ".join(reasons),
                      pip_cmd(w.path, opts), tuple(rejected), w.path, w.sha256, (), pkg.name, sev, rules=left,
                      kind=StepKind.NEWEST_COMPATIBLE))
    steps.extend(fixes)
    return steps


def _after_fixes(hyp: Environment, import_name: str, opts: Options, bound: frozenset[str],
                 hits: list[rules_mod.RuleHit], fixes: list[Step],
                 ) -> tuple[list[str], str, list[rules_mod.RuleHit], tuple[str, ...]]:
    """What the additive fixes installed below leave broken: (reason lines, severity, the hits they bring in
    that were not there before, e.g. tilelang added where no nvcc of a CUDA toolkit is there for its JIT, and
    the ids of the breakages left)."""
    added = frozenset(s.package for s in fixes if s.action == "install" and s.role == Role.FIX)
    if not hits:
        return [], "", [], ()
    left = _breakage_hits(dataclasses.replace(hyp, present={**hyp.present, **dict.fromkeys(added, True)}),
                          import_name, opts, bound) if added else hits
    reasons, sev = [], ""
    ids = {h.rule.id for h in left}
    for h in hits:
        if h.rule.id in ids:
            reasons.append(f"WARNING {h.rule.id}: {h.message} Fixes offered below")
            sev = Severity.BROKEN
        else:
            reasons.append(f"{h.rule.id} is fixed by the additive fix installed below "
                           f"({', '.join(sorted(added))}; --no-fixes to opt out)")
    new = [h for h in left if h.rule.id not in {x.rule.id for x in hits}]
    for h in new:
        reasons.append(f"WARNING {h.rule.id} (with {', '.join(sorted(added))} added): {h.message} Fixes offered below")
        sev = Severity.BROKEN
    return reasons, sev, new, tuple(dict.fromkeys(h.rule.id for h in left))


def _new_remedies(hits: list[rules_mod.RuleHit], have: list[Step], env: Environment, opts: Options,
                  found: dict[str, Candidates]) -> list[Step]:
    """The remedy steps of `hits` for packages no step in `have` covers yet."""
    covered = {s.package for s in have}
    return [s for s in _remedies(hits, env, opts, found) if s.package not in covered]


def _reqs_of_installed(found: dict[str, Candidates], dist: str, version: str | None) -> list[Requirement]:
    try:
        import importlib.metadata as md
        return [Requirement(r) for r in (md.requires(dist) or []) if "extra ==" not in r or "cuda" in r]
    except Exception:  # noqa: BLE001 - missing metadata: nothing to check
        return []


def _avoids(hit: rules_mod.RuleHit, import_name: str, version: str, env: Environment, opts: Options,
            bound: frozenset[str], dist: str) -> bool:
    hyp = _hypothetical(env, import_name, dist, version)
    return not any(h.rule.id == hit.rule.id for h in _breakage_hits(hyp, import_name, opts, bound))


def _dep_step(req: Requirement, env: Environment, opts: Options, found: dict[str, Candidates]) -> Step:
    name = str(canonicalize_name(req.name))
    have = dist_version(name)
    if have and (not req.specifier or req.specifier.contains(have, prereleases=True)):
        return Step(name, "keep", "installed", f"{name}=={have}", f"dependency {req}: {name} {have} is installed",
                    role=Role.DEPENDENCY, kind=StepKind.DEPENDENCY)
    c = found.get(name, Candidates())
    ok = [w for w in c.wheels
          if not wheel_unfit(w, env) and (not req.specifier or req.specifier.contains(w.name.version))]
    rejected = tuple(wheel_unfit(w, env) or Rejected(w.name.filename, f"version {w.name.version} not in {req}",
                                                     kind=RejectKind.VERSION) for w in c.wheels if w not in ok)
    if ok and opts.source != "hub":
        w = max(ok, key=lambda x: version_text(x.name.version) or Version("0"))
        return Step(name, "install", "wheelhouse", f"{name}=={w.name.version}", f"dependency {req}",
                    pip_cmd(w.path, opts), rejected, w.path, w.sha256, role=Role.DEPENDENCY, kind=StepKind.DEPENDENCY)
    if c.pypi_wheel is not None and not wheel_unfit(c.pypi_wheel, env):
        w = c.pypi_wheel
        return Step(name, "install", "pypi", f"{name}=={w.name.version}", f"dependency {req}",
                    pip_cmd(w.path, opts), rejected, w.path, w.sha256, role=Role.DEPENDENCY, kind=StepKind.DEPENDENCY)
    return Step(name, "refuse", "-", str(req), f"dependency {req} is not installed and no wheel for it was found"
                + (f" ({c.pypi_error})" if c.pypi_error else "") + ": add it to the wheelhouse",
                rejected=rejected, severity=Severity.FALLBACK, role=Role.DEPENDENCY,
                kind=StepKind.DEPENDENCY_UNAVAILABLE)


def _remedies(hits: list[rules_mod.RuleHit], env: Environment, opts: Options,
              found: dict[str, Candidates]) -> list[Step]:
    out: list[Step] = []
    seen: set[str] = set()
    for h in hits:
        for rem in h.rule.remedies:
            if rem["package"] in seen:
                continue
            seen.add(rem["package"])
            why = f"fixes {h.rule.id} ({h.rule.reference}): {rem['why']}"
            c = found.get(rem["package"], Candidates())
            if rem["kind"] == "image":  # what the image must carry that pip cannot install (the CUDA toolkit)
                out.append(Step(rem["package"], "offer", "-", rem["spec"], why, rem.get("command", ""),
                                severity=Severity.BROKEN, role=Role.FIX, kind=StepKind.FIX_IMAGE))
            elif rem["kind"] == "change" and rem["package"] in PINNED:
                out.append(_change_step(rem, env, opts, c, why))
            else:
                out.extend(_add_steps(rem, env, opts, c, why, Role.FIX))
    return out


def _usable_wheel(c: Candidates, env: Environment) -> wheels.WheelInfo | None:
    return next((w for w in c.wheels if not wheel_unfit(w, env)), None) or (
        c.pypi_wheel if c.pypi_wheel and not wheel_unfit(c.pypi_wheel, env) else None)


def _change_step(rem: dict[str, str], env: Environment, opts: Options, c: Candidates, why: str) -> Step:
    pkg, spec = rem["package"], rem["spec"]
    wheel = _usable_wheel(c, env)
    torch_pin = _torch_pin(pkg)
    note = f" (installed torch {env.torch.version if env.torch else '?'} declares {torch_pin})" if torch_pin else ""
    if pkg in opts.allow_change and wheel is not None:
        return Step(pkg, "install", "wheelhouse" if wheel in c.wheels else "pypi", spec,
                    why + f"; you allowed a {pkg} change{note}", pip_cmd(wheel.path, opts),
                    artifact=wheel.path, sha256=wheel.sha256, role=Role.FIX, kind=StepKind.FIX_CHANGE)
    if pkg in opts.allow_change:
        return Step(pkg, "refuse", "-", spec, why + f"; you allowed a {pkg} change but no {spec} wheel was "
                    f"found: add one to the wheelhouse{note}", role=Role.FIX, kind=StepKind.FIX_UNAVAILABLE)
    return Step(pkg, "offer", "-", spec, why + f"; changes {pkg}, which kernelcheck never does unless asked{note}",
                f"kernelcheck install --model {opts.model} --allow-change {pkg}  (or: pip install '{spec}')",
                role=Role.FIX, kind=StepKind.FIX_CHANGE)


def fix_wanted(pkg: str, opts: Options) -> str:
    """Why an additive fix is installed ("--with", "train mode default"), or "" when it is only offered."""
    if pkg in opts.with_packages:
        return "asked for with --with"
    if opts.mode == Mode.TRAIN and opts.fixes and pkg not in opts.without:
        return "installed by default in train mode (opt out: --no-fixes or --without " + pkg + ")"
    return ""


def _add_steps(rem: dict[str, str], env: Environment, opts: Options, c: Candidates, why: str,
               role: Role) -> list[Step]:
    pkg, spec = rem["package"], rem["spec"]
    wanted = fix_wanted(pkg, opts)
    fix = role == Role.FIX  # a breakage's additive fix, or (Role.PACKAGE) a package asked for with --with
    if not wanted:
        return [Step(pkg, "offer", "-", spec, why,
                     f"kernelcheck install --model {opts.model} --with {pkg}  (or: pip install {spec})", role=role,
                     kind=StepKind.FIX_ADD)]
    if c.resolve_error or (not c.resolved and _usable_wheel(c, env) is None):
        err = c.resolve_error or c.pypi_error or "not in the wheelhouse"
        return [Step(pkg, "refuse", "-", spec, f"{why}; {wanted}, but it cannot be had here: {err}. Add it and its "
                     f"dependencies to the wheelhouse (`pip download {spec} -d {opts.wheelhouse or 'WHEELHOUSE'}`) "
                     "or drop --offline", severity=Severity.BROKEN, role=role,
                     kind=StepKind.FIX_UNAVAILABLE if fix else StepKind.WITH_UNAVAILABLE)]
    if not c.resolved:
        w = _usable_wheel(c, env)
        assert w is not None
        return [Step(pkg, "install", "wheelhouse" if w in c.wheels else "pypi", f"{pkg}=={w.name.version}",
                     f"{why}; {wanted}", pip_cmd(w.path, opts), artifact=w.path, sha256=w.sha256, role=role,
                     kind=StepKind.FIX_ADD if fix else StepKind.WITH)]
    window = f" within {rem['window']}" if rem.get("window") else ""
    out = []
    for w in c.resolved:  # pip's resolution of the fix and its dependency window, pinned packages held
        name = w.name.name
        reason = f"{why}; {wanted}" if name == pkg else \
            f"dependency of the {pkg} fix{window}, resolved by pip with torch/triton/transformers pinned"
        if name == pkg and c.resolve_note:
            reason += f"; note: {c.resolve_note}"
        out.append(Step(name, "install", "pip-resolve", f"{name}=={w.name.version}", reason,
                        pip_cmd(w.path, opts), artifact=w.path, sha256=w.sha256,
                        role=role if name == pkg else Role.DEPENDENCY,
                        kind=(StepKind.FIX_ADD if fix else StepKind.WITH) if name == pkg else StepKind.DEPENDENCY))
    return sorted(out, key=lambda s: s.package == pkg)


def _torch_pin(pkg: str) -> str:
    try:
        import importlib.metadata as md
        for r in md.requires("torch") or []:
            req = Requirement(r)
            if canonicalize_name(req.name) == pkg and (req.marker is None or req.marker.evaluate()):
                return str(req).split(";")[0]
    except Exception:  # noqa: BLE001
        pass
    return ""


# ---------------------------------------------------------------- the plan

def make_plan(env: Environment, packages: tuple[str, ...], opts: Options,
              found: dict[str, Candidates], bound: frozenset[str] = frozenset()) -> Plan:
    """Ordered steps for the kernel packages `packages` (import names) of a model. Pure: the matrix is the one
    `opts` carries."""
    m = opts.matrix
    target = wheel_fit(env, opts)
    steps: list[Step] = []
    for name in packages:
        pkg = m.packages[name]
        cands = found.get(pkg.install_distribution, Candidates())
        if pkg.kind == "triton":
            steps.extend(_plan_pure(pkg, env, opts, cands, bound, found))
        elif pkg.kind == "cuda-extension" and pkg.release_wheel:
            from kernelcheck.install.extension_plan import plan_extension

            steps.extend(plan_extension(pkg, env, opts, cands, target))
        else:
            steps.append(Step(pkg.install_distribution, "refuse", "-", pkg.install_distribution,
                              f"kernelcheck does not install {pkg.title} yet ({pkg.kind}); see {pkg.reference}",
                              import_name=name, severity=Severity.FALLBACK, kind=StepKind.UNSUPPORTED_PACKAGE))
    for extra in opts.with_packages:
        if not any(s.package == extra for s in steps):
            c = found.get(extra, Candidates())
            w = _usable_wheel(c, env)
            if c.resolved:
                steps.extend(_add_steps({"package": extra, "spec": extra}, env, dataclasses.replace(
                    opts, with_packages=(*opts.with_packages, extra)), c, "asked for with --with", Role.PACKAGE))
            elif w is not None:
                steps.append(Step(extra, "install", "wheelhouse" if w in c.wheels else "pypi",
                                  f"{extra}=={w.name.version}", "asked for with --with", pip_cmd(w.path, opts),
                                  artifact=w.path, sha256=w.sha256, kind=StepKind.WITH))
            else:
                steps.append(Step(extra, "refuse", "-", extra, f"asked for with --with, but no wheel was found "
                                  f"({c.pypi_error or 'not in the wheelhouse'})", kind=StepKind.WITH_UNAVAILABLE))
    # dependencies first, once each
    ordered: list[Step] = []
    seen: set[tuple[str, str]] = set()
    for s in sorted(steps, key=lambda s: 0 if s.role == Role.DEPENDENCY else 1):
        if (s.package, s.action) in seen:
            continue
        seen.add((s.package, s.action))
        ordered.append(s)
    return Plan(tuple(ordered), target, any(s.action == "blocked" for s in ordered))
