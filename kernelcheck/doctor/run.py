"""doctor: environment + model needs + what transformers will really bind + known breakages."""

from __future__ import annotations

import functools
import os
from dataclasses import replace
from typing import Any

from kernelcheck.core import decide, environment, install_journal, manifest, matrix, models
from kernelcheck.core import device as device_mod
from kernelcheck.core import rules as rules_mod
from kernelcheck.core.errors import BadInput, BrokenEnvironment
from kernelcheck.core.status import Cause, Finding, FunctionStatus, Mode, Severity, Status
from kernelcheck.doctor import backends, drift, fixcheck, imports, provider, source_notes, submodel
from kernelcheck.doctor.why import AttrCheck, attr_in_process, device_ok, import_error_fill, package_row, why_torch
from kernelcheck.doctor.wording import install_fix as _install_fix
from kernelcheck.doctor.wording import no_device_reason as _no_device_reason
from kernelcheck.integrations import fla_dispatch, transformers, transformers_models, transformers_types
from kernelcheck.report.model import Bindings, Needs, Report
from kernelcheck.report.progress import Ticker
from kernelcheck.report.sections import EnvironmentView, ModelRef


def _unbound_status(fn: str, dist: str, b: transformers.Binding, env: environment.Environment, module: str,
                    phase: str) -> FunctionStatus:
    """A function the module binds no kernel to: nothing to check, and nothing to install (used=False: no
    kernel path exists for it, so it is no fallback)."""
    if b.extra.get("defined_in_module"):
        return FunctionStatus(fn, dist, Status.UNSUPPORTED, f"{module}.{fn}",
                              f"transformers {env.transformers}'s {module} calls its own torch `{fn}` (defined in "
                              "the module, no kernel bound to it): no package serves it in this version, so there "
                              "is nothing to install", None, phase, used=False)
    return FunctionStatus(fn, dist, Status.UNSUPPORTED, "-", f"transformers {env.transformers}'s {module} does not "
                          f"call `{fn}`: nothing to check for this version", None, phase, used=False)


def function_statuses(
    needs: models.Needs, result: transformers.BindingResult, env: environment.Environment,
    mode: str, query: str | None, m: matrix.Matrix, attr: AttrCheck = attr_in_process, *,
    device: device_mod.Device,
) -> list[FunctionStatus]:
    """Each bound function's first status, from what transformers binds and the matrix `m` (its packages,
    functions and transformers regimes), judged for the verdict's `device` with what is installed: no load here,
    the caller passes the matrix it decides with."""
    out = []
    in_prefill = source_notes.decode_in_prefill(result.module, m) if mode == Mode.TRAIN else {}  # 5.25's chunked path
    for fn, b in result.bindings.items():
        info = m.functions.get(fn)
        pkg = m.packages.get(b.package or (info.package if info else ""))
        dist = pkg.install_distribution if pkg else b.package
        phase = info.phase if info else ""
        used = not (mode == Mode.TRAIN and phase == "decode") or fn in in_prefill
        if b.bound == "unbound":
            out.append(_unbound_status(fn, dist, b, env, result.module, phase))
            continue
        if b.bound == "package":
            out.append(package_row(fn, dist, b, pkg, env, device, query, result.module,
                                   _checks_device_per_call(env, m), phase, used))
            continue
        why = why_torch(fn, b, env, query, m, device, attr)
        out.append(FunctionStatus(fn, dist, why.status, why.implementation or b.implementation, why.reason, why.fix,
                                  phase, used, cause=why.cause))
    return out


def _checks_device_per_call(env: environment.Environment, m: matrix.Matrix) -> bool:
    """Decorator-regime transformers (callers pass only decorator bindings) outside the no_device_check range
    (matrix/transformers.toml) test each call's input device (5.25: `use_kernel_func_from_hub_with_fallback`
    falls back for unsupported devices)."""
    ranges = [e["transformers"] for e in m.transformers.get("no_device_check", [])]
    if not env.transformers or not ranges:
        return False
    return not any(rules_mod.version_in(env.transformers, r) for r in ranges)


def _attention_status(needs: models.Needs, env: environment.Environment, query: str | None,
                      m: matrix.Matrix, device: device_mod.Device) -> FunctionStatus:
    impl = needs.attn_implementation
    if not needs.attention_package:
        return FunctionStatus(f"attention:{impl}", "torch", Status.FAST,
                              "torch.nn.functional.scaled_dot_product_attention" if impl == "sdpa" else "eager",
                              None, None, "attention")
    pkg = m.packages[needs.attention_package]
    st = env.packages.get(pkg.name)
    if st is None or not st.installed:
        return FunctionStatus(f"attention:{impl}", pkg.install_distribution, Status.BROKEN, "-",
                              f"config asks for attn_implementation={impl} but {pkg.title} is not installed: "
                              "from_pretrained raises ImportError",
                              _install_fix(query, pkg.install_distribution) + "  (or use attn_implementation='sdpa')",
                              "attention")
    if not st.imports:
        return FunctionStatus(f"attention:{impl}", pkg.install_distribution, Status.BROKEN, "-",
                              f"{st.distribution} {st.version} does not import: {st.error}",
                              _install_fix(query, pkg.install_distribution), "attention")
    if not device_ok(pkg, env, device):
        return FunctionStatus(f"attention:{impl}", pkg.install_distribution, Status.UNSUPPORTED, st.location or "-",
                              _no_device_reason(env, pkg, device), "use attn_implementation='sdpa' here", "attention")
    return FunctionStatus(f"attention:{impl}", pkg.install_distribution, Status.FAST, pkg.name, None, None, "attention")


def environment_findings(env: environment.Environment, m: matrix.Matrix) -> list[Finding]:
    out = []
    if env.torch and not env.torch.cuda:
        out.append(Finding("torch-cpu-build", Severity.INFO,
                           f"torch {env.torch.version} is a CPU build: no CUDA kernel can run in this environment."))
    elif env.torch and env.torch.cuda and not env.cuda_gpu:
        out.append(Finding("no-gpu", Severity.INFO,
                           f"torch {env.torch.version} is built for CUDA {env.torch.cuda} but no "
                           "GPU is visible (driver missing, CUDA_VISIBLE_DEVICES empty, or a build machine)."))
    for name, st in env.packages.items():
        if st.installed and not st.imports:
            rule = rules_mod.match_import_error(st.error or "", m)
            fill = import_error_fill(env, st.distribution or name, name, None)
            out.append(Finding(rule.id if rule else f"{name}-import-fails", Severity.WARNING,
                               (rule.message.format(**fill) + " " if rule else "")
                               + f"`import` of {st.distribution} {st.version} fails: {st.error}",
                               rule.fix.format(**fill) if rule else None, rule.reference if rule else None))
    return out + install_journal.findings()


def runtime_findings(environ: dict[str, str], dist_version: Any = None) -> list[Finding]:
    """What can change the dispatch at run time without any package change: variables that transformers,
    fla or kernels read, and Unsloth, which swaps fla in when it is imported."""
    dist_version = dist_version or environment.dist_version
    out: list[Finding] = []
    set_vars = list(environment.dispatch_variables(environ))
    if set_vars:
        out.append(Finding("dispatch-env", Severity.INFO,
                           "variables that change which kernel runs are set here: "
                           + ", ".join(f"{k}={environ[k]}" for k in set_vars)
                           + ". The job sees the same answer only if it runs with the same values."))
    zoo = dist_version("unsloth_zoo") or dist_version("unsloth-zoo")
    if zoo:
        out.append(Finding(
            "unsloth-replaces-fla", Severity.WARNING,
            f"unsloth_zoo {zoo} is installed: `import unsloth` loads the flash-linear-attention it bundles (0.5.1) "
            "as `fla`, patches transformers' is_flash_linear_attention_available and sets FLA_TILELANG=0. In a job "
            "that imports unsloth first, 'flash-linear-attention is not installed' below does not hold (its fla "
            "runs instead), and fla's TileLang backend, the fix for the Hopper backward of fla#640, is switched off.",
            "check the job itself: kernelcheck verify --model M after `import unsloth`, or keep FLA_TILELANG unset "
            "and install fla-core + tilelang where training on Hopper",
            "https://github.com/unslothai/unsloth/issues/10487, https://github.com/unslothai/unsloth-zoo/pull/865"))
    return out


def _transformers_findings(env: environment.Environment, regime: str, m: matrix.Matrix) -> list[Finding]:
    out: list[Finding] = []
    if not env.transformers:
        return out
    from kernelcheck.integrations.transformers_hub import transformers_hub  # reads transformers' source, no import

    th = transformers_hub(m=m)
    if th.window and env.kernels and not th.window_met:
        out.append(Finding("kernels-window", Severity.INFO,
                           f"kernels {env.kernels} is outside the window transformers {env.transformers} accepts "
                           f"({th.window_text}): Hub kernels (use_kernels=True) are treated as absent.",
                           f"pip install 'kernels{th.window_text}'  (only needed for Hub kernels)",
                           th.window_source))
    if regime == "decorator":
        out.append(Finding("bound-at-import", Severity.INFO,
                           f"transformers {env.transformers} picks each kernel once, when the modeling module is "
                           "imported, and warns once per process: a package installed later is used only after a "
                           "restart, and a second model in the same process logs nothing."))
    return out


def doctor(query: str | None, mode: str = Mode.TRAIN, env: environment.Environment | None = None,
           exact: bool = False, hub: bool | None = None, hub_device: str | None = None,
           hub_source: str = "auto", isolate: bool = False, *, m: matrix.Matrix,
           import_cache: bool = True, run_here: bool = False) -> Report:
    """Build the doctor report. Raises BadInput for bad models or a missing torch.

    hub: None checks Hub kernels as the installed transformers would use them; True = the job passes
    use_kernels=True; False skips the Hub section. hub_device: the device type the job runs on (default:
    the torch build's). hub_source: auto | cache | hub (where build variants are listed from).
    isolate (the CLI's default, not with exact): every import of a kernel package or modeling module runs in
    child processes started first thing (kernelcheck/doctor/imports.py): same answers, and this process
    never pays for torch._dynamo; callers that import the model afterwards anyway (verify) keep it off.
    m: the matrix every decision of this run reads (a command's Context.matrix).
    import_cache False (--no-cache): the import children prove afresh, as with KERNELCHECK_IMPORT_CACHE=0.
    run_here (verify): the verdict is for the device this process runs the model on (core/device.py)."""
    if mode not in tuple(Mode):
        raise BadInput(f"--mode must be train or infer, not '{mode}'.")
    started: list[imports.ImportProbe] = []
    single = _single_sequence(query, m) if isolate and not exact and env is None and hasattr(os, "fork") else None
    try:
        if single is not None:  # fork the children once torch is imported, before any CUDA call
            ticker = Ticker("doctor: importing torch").start()  # stopped (its thread joined) before the fork

            def fork_children() -> None:
                ticker.stop()
                started.append(imports.ImportProbe.start(single, query, m, cache=import_cache))

            try:
                env = environment.probe(m=m, packages=False, after_torch_import=fork_children)
            finally:
                ticker.stop()
        report = _doctor(query, mode, env, exact, hub, (hub_device, run_here), hub_source, next(iter(started), None), m)
        if started:
            started[0].annotate(report)  # where the import answers came from; caches a complete proof
        return report
    finally:
        for probe in started:
            probe.close()


def _single_sequence(query: str | None, m: matrix.Matrix) -> bool | None:
    """Whether one import child must run doctor's whole sequence (a modeling module is imported: transformers
    <= 5.14, or newer than tested); None where doctor stops with bad input before any import (a model but no
    transformers)."""
    version = environment.dist_version("transformers")
    if query is not None and not version:
        return None
    return query is not None and (transformers.detect_regime() != "decorator" or _newer_than_tested(version, m))


def _with_packages(env: environment.Environment, probe: imports.ImportProbe | None, *,
                   m: matrix.Matrix) -> environment.Environment:
    if probe is None or env.packages:
        return environment.with_packages(env, m=m)
    return replace(env, packages=probe.packages())


def _bind(model: models.ResolvedModel, report: Report, env: environment.Environment, exact: bool,
          probe: imports.ImportProbe | None, m: matrix.Matrix) -> transformers.BindingResult:
    """What transformers binds, read as before; with `probe`, every import in it runs in the children."""
    spec = model.spec
    newer = not exact and _newer_than_tested(env.transformers, m)
    if probe is None:
        result = transformers.bind(spec.module, spec.functions, exact=exact, m=m)
        return _cross_check(report, result, spec, env, m) if newer else result
    read = transformers.read_static(spec.module)
    lazy = transformers.bind_lazy(spec.module, spec.functions, m=m) if read is None else None
    if lazy is not None:  # <= 5.14 Mamba family: read from source; the child only probes the packages
        probe.plan_sequence(None, spec.module, spec.functions, 0)
        probe.send()
        return lazy
    if read is not None and not newer:
        probe.plan_static(read, spec.functions)
        probe.send()
        return transformers.bindings_from_static(read, spec.functions, probe.resolved(read), m=m)
    # as bind(): the static reading, or the modeling module imported when it cannot be read; then the
    # cross-check's import for a transformers newer than tested (one child runs them in this order)
    probe.plan_sequence(read, spec.module, spec.functions, (1 if read is None else 0) + (1 if newer else 0))
    probe.send()
    result = (transformers.bindings_from_static(read, spec.functions, probe.resolved(read), m=m) if read is not None
              else probe.exact(0))
    return _cross_check(report, result, spec, env, m, probe.exact(1 if read is None else 0)) if newer else result


def _require_torch(env: environment.Environment) -> None:
    """Refuse (BadInput) an environment where torch is missing or does not import."""
    if env.torch is None:
        raise BadInput("torch is not installed in this Python environment, so no kernel can run and transformers "
                       "cannot load the model. Install the torch build you will train with (for example "
                       "`pip install torch` with the index URL for your CUDA version), then run kernelcheck again.")
    if env.torch.import_error is not None:
        raise BrokenEnvironment(f"BROKEN: torch is installed but its import fails here ({env.torch.import_error}), "
                                "so every job in this environment would stop before any kernel runs. `python -c "
                                "'import torch'` shows the full error; reinstall the torch build you train with (pip "
                                "install --force-reinstall torch, with the index URL for your CUDA version) and run "
                                "kernelcheck again.")


def _environment_only(report: Report, env: environment.Environment, mode: str, hub: bool | None,
                      hub_device: str | None, hub_source: str, probe: imports.ImportProbe | None,
                      m: matrix.Matrix) -> Report:
    """Fill the report of a doctor run without a model: environment, packages and runtime findings only."""
    if probe is not None:
        probe.plan_packages()
        probe.send()
    env = _with_packages(env, probe, m=m)
    report.environment = EnvironmentView.of(env)
    report.findings.extend(environment_findings(env, m))
    report.findings.extend(drift.explain(env))  # what kernelcheck installed vs what is here now
    report.findings.extend(runtime_findings(dict(os.environ)))
    report.findings.extend(_transformers_findings(env, transformers.detect_regime() if env.transformers else "", m))
    if hub is not False and env.transformers:
        _hub_check(report, env, None, (), mode, hub, hub_device, hub_source, None, m=m)
    # Without a model nothing says which kernels a job needs, so nothing was shown to run fast: an
    # environment-only report is never READY (a CI gate that forgets --model must not pass).
    report.findings.append(Finding(
        "no-model", Severity.FALLBACK, "no model was named, so no kernel was checked: this report covers the "
        "environment and installed packages only and cannot say that anything fast will run.",
        "kernelcheck doctor --model M --mode train (the model your job loads)"))
    fixcheck.apply_to(report, env, mode, None, frozenset(), _built_nvcc(), m)
    return report


def _doctor(query: str | None, mode: str, env: environment.Environment | None, exact: bool, hub: bool | None,
            device: tuple[str | None, bool], hub_source: str, probe: imports.ImportProbe | None,
            m: matrix.Matrix) -> Report:
    # Bind before importing any kernel package ourselves: our own imports (fla.ops ...) would change
    # what transformers finds, exactly as a package imported earlier in a user's process does.
    env = env or environment.probe(m=m, packages=False)
    _require_torch(env)
    report = Report("doctor", EnvironmentView.of(env), None, mode if query else None)
    verdict = report.device = device_mod.choose(env, device[0], run_here=device[1])  # the verdict's one device
    hub_device = verdict.type
    if query is None:
        return _environment_only(report, env, mode, hub, hub_device, hub_source, probe, m)
    if not env.transformers:
        raise BadInput("transformers is not installed here: kernelcheck checks what transformers will bind. "
                       "Install the transformers version your job uses, then run again.")
    model = transformers_models.resolve(query, m=m)
    report.model = ModelRef.of(model)
    too_old = _too_old(model, env)
    if too_old is not None:
        if probe is not None:
            probe.plan_packages()
            probe.send()
        return _too_old_report(report, model, env, too_old, mode, m, probe)
    result = submodel.restrict(model, _bind(model, report, env, exact, probe, m), report.findings, m=m)
    env = _with_packages(env, probe, m=m)
    report.environment = EnvironmentView.of(env)
    needs = models.needs(model, tuple(result.bindings) if result.bindings else None, m=m)
    report.needs = Needs(list(needs.functions), list(needs.packages), needs.attn_implementation)
    report.bindings = Bindings(result.regime, result.module)
    _function_section(report, model, result, needs, env, mode, query, m, verdict,
                      probe.attr if probe is not None else attr_in_process)
    report.functions.append(_attention_status(needs, env, query, m, verdict))
    report.findings.extend(environment_findings(env, m))
    report.findings.extend(drift.explain(env))
    report.findings.extend(_transformers_findings(env, result.regime, m))
    if not result.module_error and not any(f.id == "sub-model-without-kernels" for f in report.findings):
        report.findings.extend(source_notes.source_findings(result.module, env, mode, m))  # the module's layers
    runtime = runtime_findings(dict(os.environ))
    report.findings.extend(runtime)
    if any(f.id == "unsloth-replaces-fla" for f in runtime):
        report.functions = _unsloth_noted(report.functions, m)
    bound = _bound(report, result)
    report.backends, backend_findings = backends.section(env, verdict, report.functions, mode, m)  # pre-rules
    report.functions = decide.decide_all(report.functions, rules=_apply_rules(report, bound, env, mode, query, m))
    report.findings.extend(backend_findings)
    fixcheck.apply_to(report, env, mode, query, bound, _built_nvcc(), m)  # no printed fix makes it worse
    provider.apply_builds(report, env, m)  # what runs for each function: its pip build, or torch
    if hub is not False:
        _hub_check(report, env, result.module, needs.functions, mode, hub, hub_device, hub_source, query,
                   submodel.dropped(report.findings), m=m)
        provider.apply_hub(report, env, mode, query, m=m)  # a Hub build that replaces them, judged as what runs
    report.findings.extend(provider.compile_findings(report, query, m=m))
    return report


_UNSLOTH_NOTE = (" (note: a job that imports unsloth first runs unsloth_zoo's bundled fla 0.5.1 here "
                 "instead; see unsloth-replaces-fla)")


def _unsloth_noted(functions: list[FunctionStatus], m: matrix.Matrix) -> list[FunctionStatus]:
    """fla-core's functions that fall back because fla-core is not installed get the unsloth note: a job that
    imports unsloth first has unsloth_zoo's bundled fla instead (decided on the cause, not on the words)."""
    fla = m.packages["fla"].install_distribution  # what unsloth_zoo's bundle stands in for
    return [decide.decide(fs, notes=(_UNSLOTH_NOTE,)) if fs.package == fla and fs.reason
            and fs.cause == Cause.NOT_INSTALLED else fs for fs in functions]


def _function_section(report: Report, model: models.ResolvedModel, result: transformers.BindingResult,
                      needs: models.Needs, env: environment.Environment, mode: str, query: str, m: matrix.Matrix,
                      device: device_mod.Device, attr: AttrCheck = attr_in_process) -> None:
    """One status per fast function, by regime (the lazy-kernel regime decides at build time: doctor/lazy.py)."""
    if result.module_error:
        report.findings.append(Finding(
            "modeling-import-fails", Severity.BROKEN,
            f"`import {result.module}` fails: {result.module_error}. transformers cannot build this model here.",
            _module_error_fix(result.module_error, env, query, m),
        ))
        for fn in needs.functions:
            info = m.functions.get(fn)
            report.functions.append(FunctionStatus(
                fn, m.packages[info.package].install_distribution if info else "?", Status.BROKEN, "-",
                f"the modeling module does not import: {result.module_error}", None, info.phase if info else ""))
    elif result.regime == "lazy-kernel":
        from kernelcheck.doctor.lazy import lazy_statuses

        lazy_fns, lazy_findings = lazy_statuses(model, result, env, mode, query, m, device=device)
        report.functions.extend(lazy_fns)
        report.findings.extend(lazy_findings)
    else:
        report.functions.extend(function_statuses(needs, result, env, mode, query, m, attr, device=device))


def _bound(report: Report, result: transformers.BindingResult) -> frozenset[str]:
    """The kernel packages transformers binds for a function used in this mode."""
    return frozenset(b.package for fn, b in result.bindings.items() if b.bound == "package"
                     and any(f.name == fn and f.used for f in report.functions))


def _apply_rules(report: Report, bound: frozenset[str], env: environment.Environment, mode: str,
                 query: str, m: matrix.Matrix) -> list[decide.RuleEvidence]:
    """Known breakages (matrix/breakages.toml) as findings; the certain hits, for the decider to raise the
    functions they name."""
    facts = rules_mod.Facts(env=env, mode=mode, bound=bound, built_nvcc=_built_nvcc(), model=query,
                            functions=tuple(f.name for f in report.functions if f.used),
                            fla_dispatch=functools.partial(fla_dispatch.backends, m=m),
                            cuda=report.device.type == "cuda" if report.device is not None else None)
    certain = []
    for hit in rules_mod.evaluate(facts, m):
        sev = hit.rule.severity if hit.certain else Severity.WARNING
        msg = hit.message if hit.certain else f"may apply (could not confirm every condition): {hit.message}"
        report.findings.append(Finding(hit.rule.id, sev, msg, hit.fix, hit.rule.reference, hit.rule.functions))
        if hit.certain:
            certain.append(decide.RuleEvidence(hit.rule.id, hit.rule.severity, hit.rule.title, hit.message, hit.fix,
                                               hit.rule.functions))
    return certain


def _newer_than_tested(version: str | None, m: matrix.Matrix) -> bool:
    tested = m.transformers.get("tested_through")
    if not version or not tested:
        return False
    have, top = rules_mod.base_version(version), rules_mod.base_version(tested)
    return have is not None and top is not None and have > top


def _cross_check(report: Report, static: transformers.BindingResult, spec: matrix.ModelType,
                 env: environment.Environment, m: matrix.Matrix,
                 exact: transformers.BindingResult | None = None) -> transformers.BindingResult:
    """transformers newer than any the tests cover: import the modeling module (here, or `exact` from the import
    children) and compare what it really bound with the static reading; the imported answer wins, every
    difference is a warning."""
    tested = m.transformers.get("tested_through")
    exact = exact or transformers.bind_exact(spec.module, spec.functions, m=m)

    def view(r: transformers.BindingResult) -> dict[str, tuple[str, str]]:
        return {f: (b.bound, b.implementation) for f, b in r.bindings.items()}

    diff = sorted(set(view(static).items()) ^ set(view(exact).items()))
    msg = (f"transformers {env.transformers} is newer than the newest version kernelcheck's tests cover ({tested}); "
           "doctor imported the modeling module to check its static reading")
    if exact.module_error:
        msg += f", but the import failed ({exact.module_error}): the static reading is shown"
    elif diff:
        msg += (", and they differ: " + "; ".join(f"{f}: {b} {i}" for f, (b, i) in diff)
                + ". The imported answer is shown")
    else:
        msg += ", and they agree"
    report.findings.append(Finding("transformers-newer-than-tested", Severity.WARNING, msg + ".",
                                   "check kernelcheck for a release that covers this transformers"))
    return static if exact.module_error else exact


def _too_old(model: models.ResolvedModel, env: environment.Environment) -> Finding | None:
    """A model_type kernelcheck lists that the installed transformers does not register yet."""
    known = transformers_types.known_model_types()
    if known is None or model.model_type in known or not model.spec.since:
        return None
    return Finding(
        "transformers-too-old", Severity.BROKEN,
        f"this transformers is too old for {model.model_type}: it arrives in transformers {model.spec.since} "
        f"(installed: {env.transformers}). from_pretrained does not recognise the architecture and the job fails "
        "before any kernel is chosen.",
        f"pip install 'transformers>={model.spec.since}'  (a transformers change: only if your job allows it)",
        "matrix/models.toml since (first 5.x wheel holding the modeling module)")


def _too_old_report(report: Report, model: models.ResolvedModel, env: environment.Environment,
                    finding: Finding, mode: str, m: matrix.Matrix,
                    probe: imports.ImportProbe | None = None) -> Report:
    env = _with_packages(env, probe, m=m)
    report.environment = EnvironmentView.of(env)
    report.findings.append(finding)
    for fn in model.spec.functions:
        info = m.functions.get(fn)
        report.functions.append(FunctionStatus(
            fn, m.packages[info.package].install_distribution if info else "?", Status.BROKEN, "-",
            f"transformers {env.transformers} has no {model.model_type} model (it arrives in {model.spec.since})",
            finding.fix, info.phase if info else "", used=not (mode == Mode.TRAIN and info and info.phase == "decode")))
    report.findings.extend(environment_findings(env, m))
    return report


def _hub_check(report: Report, env: environment.Environment, module: str | None, functions: tuple[str, ...],
               mode: str, hub: bool | None, device: str | None, source: str, query: str | None,
               dropped: tuple[str, ...] = (), *, m: matrix.Matrix) -> None:
    from kernelcheck.hub.check import check

    check(report, env, module, functions, mode, use_hub=hub, device=device, source=source, query=query, dropped=dropped,
          m=m)


def _module_error_fix(error: str, env: environment.Environment, query: str, m: matrix.Matrix) -> str | None:
    rule = rules_mod.match_import_error(error, m)
    if rule:
        return rule.fix.format(**import_error_fill(env, "the failing package", "", query))
    return "reinstall the package named in the error, or remove it to get the (slow) torch path"


def _built_nvcc() -> dict[str, str]:
    return manifest.built_nvcc()  # what compiled each installed kernel package, from kernelcheck's install manifest
