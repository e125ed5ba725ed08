"""No fix doctor prints makes the verdict worse (doctor/fixcheck.py): each fix is simulated against the rules first.

The environments are values as the probe describes them (tests/environments.py); the rules, the matrix and the
decider are the real ones. The CPU case is the one a user met: fla-core installed without triton on a CPU box
with transformers 5.24, where `pip install triton` turned exit 3 into exit 4 (fla-cpu-crash). The same path runs
on the H200 for the fla#640 case (`pip install triton` alone would hit fla-640-refuses in train mode).
"""

from __future__ import annotations

import functools
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck.core import decide, matrix, rules
from kernelcheck.core.environment import Environment, PackageState
from kernelcheck.core.fix import Change, Fix
from kernelcheck.core.status import Finding, FunctionStatus, Verdict, worst
from kernelcheck.doctor import fixcheck
from kernelcheck.doctor.run import environment_findings
from kernelcheck.integrations import fla_dispatch
from tests.environments import make_env

M = matrix.load()
NO_TRITON = "ModuleNotFoundError: No module named 'triton'"
TRITON_FIX = M.import_errors[[r.id for r in M.import_errors].index("missing-triton")].fix


def _fla(version: str = "0.6.0", error: str | None = None) -> dict[str, PackageState]:
    return {"fla": PackageState("fla", True, version, "fla-core", error is None, error)}


def _env(cap: str | None, *, transformers: str = "5.24.0", triton: str | None = None, fla: str | None = "0.6.0",
         fla_error: str | None = NO_TRITON, tilelang: bool = False) -> Environment:
    e = make_env(cap, triton=triton, transformers=transformers, tilelang=tilelang,
                 torch="2.13.0+cpu" if cap is None else "2.11.0+cu130", cuda=None if cap is None else "13.0")
    return replace(e, packages=_fla(fla, fla_error) if fla else {})


def _state(env: Environment, mode: str = "train", pinned: str | None = None,
           extra_fix: str | None = None) -> fixcheck.State:
    """The functions and findings doctor builds for a Qwen3.5 model here, before its fixes are checked."""
    st_ = env.packages.get("fla")
    imports = bool(st_ and st_.imports)
    bound = frozenset({"fla"}) if imports and (env.cuda_gpu or env.transformers >= "5.15") else frozenset()
    if "fla" in bound:
        fs = FunctionStatus("chunk_gated_delta_rule", "fla-core", "fast" if env.cuda_gpu else "unsupported", "fla")
    elif st_ is not None:
        fs = FunctionStatus("chunk_gated_delta_rule", "fla-core", "fallback", "torch", "fla-core does not import",
                            TRITON_FIX if st_.error == NO_TRITON else None)
    else:
        fs = FunctionStatus("chunk_gated_delta_rule", "fla-core", "fallback", "torch", "not installed",
                            extra_fix or "kernelcheck install --model qwen3.8-27b")
    findings = environment_findings(env, matrix.load())
    facts = rules.Facts(env=env, mode=mode, bound=bound, model="qwen3.8-27b",
                        fla_dispatch=functools.partial(fla_dispatch.backends, m=M))
    hits = rules.evaluate(facts, matrix.load())
    findings += [Finding(h.rule.id, h.rule.severity if h.certain else "warning", h.message, h.fix) for h in hits]
    evidence = [decide.RuleEvidence(h.rule.id, h.rule.severity, h.rule.title, h.message, h.fix, h.rule.functions)
                for h in hits if h.certain]
    functions = decide.decide_all([fs], rules=evidence)
    return fixcheck.State(env, mode, tuple(functions), tuple(findings), bound, "qwen3.8-27b", {}, pinned)


def _change(fix: object) -> Change | None:
    """A printed function's fix is a Fix value: what it installs is read from it, not parsed again here."""
    assert isinstance(fix, Fix), fix
    return fix.change


def _printed(state: fixcheck.State) -> tuple[list[FunctionStatus], list[Finding]]:
    findings, fixes = fixcheck.guard(state, M)
    return [decide.decide(fs, checked_fix=fixes.get(fs.name)) for fs in state.functions], findings


def test_cpu_with_fla_core_and_no_triton_never_prints_pip_install_triton_alone():
    state = _state(_env(None))
    assert decide.verdict(state.functions, state.findings) == Verdict.FALLBACK  # exit 3 now
    change = Fix(TRITON_FIX).change
    assert change is not None and change.install == (("triton", None),)
    then, hits = fixcheck.verdict_after(change, state, M)
    assert then == Verdict.BROKEN and [h.rule.id for h in hits] == ["fla-cpu-crash"]  # what the user met: exit 4
    functions, findings = _printed(state)
    (fn,) = functions
    assert fn.fix is not None and fn.fix.startswith("on a machine with an NVIDIA GPU")
    assert fn.fix.endswith(TRITON_FIX)
    assert "fla-cpu-crash" in (fn.reason or "")
    (warn,) = [f for f in findings if f.id == "missing-triton"]
    assert warn.fix == fn.fix and "fla-cpu-crash" in warn.message  # wording: renderer test (fixcheck's note)
    assert fn.status == "fallback"  # the status is unchanged: only what is printed as its fix


def test_environment_only_doctor_checks_the_fix_as_if_any_model_bound_fla():
    env = _env(None)
    findings = [*environment_findings(env, matrix.load()), Finding("no-model", "fallback", "no model")]
    state = fixcheck.State(env, "train", (), tuple(findings), frozenset(), "", {}, None, any_model=True)
    out, _ = fixcheck.guard(state, M)
    (warn,) = [f for f in out if f.id == "missing-triton"]
    assert warn.fix is not None and warn.fix.startswith("on a machine with an NVIDIA GPU")


def test_the_same_fix_is_kept_where_transformers_checks_the_device():
    state = _state(_env(None, transformers="5.25.0"))  # 5.25 runs the torch function on CPU inputs
    (fn,), _ = _printed(state)
    assert fn.fix == TRITON_FIX


def test_a_prediction_for_hopper_from_a_torch_that_pins_no_triton_never_prints_pip_install_triton_alone():
    """doctor --arch 9.0 on a GPU-less box (transformers 5.25): `pip install triton` gets whatever the job machine's
    torch pins; with triton 3.6 (torch 2.11's pin) fla 0.6.0 refuses the Hopper backward (fla-640-refuses): 3 -> 4."""
    state = _state(_env("9.0", transformers="5.25.0"), pinned=None)
    assert decide.verdict(state.functions, state.findings) == Verdict.FALLBACK
    change = Fix(TRITON_FIX).change
    assert change is not None
    then, hits = fixcheck.verdict_after(change, state, M)
    assert then == Verdict.BROKEN and "fla-640-refuses" in [h.rule.id for h in hits]
    (fn,), findings = _printed(state)
    assert fn.fix != TRITON_FIX and fn.fix is not None
    for version in ("3.4.0", "3.6.0", "3.7.1", "3.8.0"):
        after, _ = fixcheck.verdict_after(_change(fn.fix), replace(state, pinned_triton=version), M)
        assert worst([after, Verdict.FALLBACK]) == Verdict.FALLBACK, (fn.fix, version, after)


def test_on_an_h200_in_train_mode_triton_alone_would_hit_fla_640_so_tilelang_comes_with_it():
    state = _state(_env("9.0"), pinned="3.6.0")
    (fn,), findings = _printed(state)
    assert fn.fix == "pip install triton tilelang"
    assert "fla-640-refuses" in (fn.reason or "")
    assert fixcheck.verdict_after(_change(fn.fix), state, M)[0] == Verdict.READY  # type: ignore[arg-type]
    (fn,), _ = _printed(_state(_env("9.0"), mode="infer", pinned="3.6.0"))
    assert fn.fix == TRITON_FIX  # infer mode: no backward, no fla#640


def test_fixes_that_help_are_printed_as_the_rules_give_them():
    state = _state(_env("9.0", triton="3.6.0", fla_error=None))  # fla bound: fla-640-refuses, its own fix
    _, findings = _printed(state)
    (hit,) = [f for f in findings if f.id == "fla-640-refuses"]
    assert hit.fix == M.breakages[[b.id for b in M.breakages].index("fla-640-refuses")].fix.replace(
        "{model}", "qwen3.8-27b")
    cpu = _state(_env(None, triton="3.6.0", fla_error=None))  # fla bound on CPU: fla-cpu-crash, fix uninstall
    _, findings = _printed(cpu)
    (crash,) = [f for f in findings if f.id == "fla-cpu-crash"]
    assert crash.fix is not None and crash.fix.startswith("pip uninstall -y fla-core")


def test_only_pip_commands_are_simulated():
    assert Fix("run on a machine with an NVIDIA GPU").change is None
    assert Fix("kernelcheck install --model M --source build").change is None
    assert Fix("use triton>=3.8 with a torch that pins it").change is None
    c = Fix("pip install 'fla-core>=0.6.0' tilelang  (or allow a triton change: triton>=3.7.1)").change
    assert c is not None and c.install == (("fla-core", "0.6.0"), ("tilelang", None))
    c = Fix("pip uninstall -y fla-core flash-linear-attention  (on CPU-only machines), or run on a GPU").change
    assert c is not None and c.uninstall == ("fla-core", "flash-linear-attention")


def test_a_fix_with_no_safe_form_is_withheld_with_the_reason():
    # a made-up rule that any install of triton breaks, whatever the machine: nothing says where it is safe
    rule = matrix.Breakage("triton-breaks-all", "triton breaks everything", "broken", ("chunk_gated_delta_rule",),
                           {"bound": ["fla"]}, "it breaks", "pip uninstall -y triton", "test")
    m = replace(M, breakages=(rule,))
    state = replace(_state(_env(None)), findings=())
    checked = fixcheck.check(Fix(TRITON_FIX), state, m)
    assert checked.fix is None and "triton-breaks-all" in checked.note  # wording: renderer test (fixcheck's note)


CAPS = st.sampled_from([None, "8.0", "9.0", "10.0", "10.3"])
TRITONS = st.sampled_from([None, "3.4.0", "3.6.0", "3.7.1", "3.8.0"])
TFS = st.sampled_from(["5.14.1", "5.17.0", "5.24.0", "5.25.0"])
FLAS = st.sampled_from([None, ("0.4.2", None), ("0.5.1", None), ("0.6.0", None), ("0.6.0", NO_TRITON)])
FIXES = st.sampled_from([None, "pip install fla-core", "pip install 'fla-core>=0.6.0'", "pip install triton"])


@settings(max_examples=150, deadline=None)
@given(cap=CAPS, triton=TRITONS, tf=TFS, fla=FLAS, tilelang=st.booleans(), mode=st.sampled_from(["train", "infer"]),
       pinned=st.sampled_from([None, "3.6.0", "3.8.0"]), extra=FIXES)
def test_no_printed_fix_leads_to_a_worse_verdict(cap, triton, tf, fla, tilelang, mode, pinned, extra):
    fla_v, fla_err = fla if fla else (None, None)
    if fla_err == NO_TRITON:
        triton = None
    env = _env(cap, transformers=tf, triton=triton, fla=fla_v, fla_error=fla_err, tilelang=tilelang)
    state = _state(env, mode, pinned, extra)
    now = decide.verdict(state.functions, state.findings)
    functions, findings = _printed(state)
    assert decide.verdict(functions, findings) == now  # checking fixes never changes the verdict itself
    by_fix = {f.fix: f.id for f in findings if f.fix}
    # a torch that pins no triton (a CPU build; a prediction for another machine): `pip install triton` may get any
    # version there, each judged on its own
    gets = [pinned] if pinned else [None, "3.4.0", "3.6.0", "3.7.1", "3.8.0"]
    for fix in fixcheck.printed_fixes(functions, findings):
        change = fix.change
        if change is None:
            continue
        for version in gets:
            then, _ = fixcheck.verdict_after(change, replace(state, pinned_triton=version), M, by_fix.get(fix))
            assert worst([then, now]) == now, (fix, version, then, now)
