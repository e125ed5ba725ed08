"""The status decider (kernelcheck/core/decide.py) with explicit evidence: binding < rules < Hub < live."""

from __future__ import annotations

from kernelcheck.core import decide
from kernelcheck.core.decide import HubEvidence, Observation, RuleEvidence
from kernelcheck.core.status import Finding, FunctionStatus, Verdict

FN = "chunk_gated_delta_rule"


def bound(status: str = "fast", used: bool = True, reason: str | None = None) -> FunctionStatus:
    return FunctionStatus(FN, "flash-linear-attention", status, "fla.ops.gated_delta_rule.chunk_gated_delta_rule",
                          reason, None, "prefill", used)


def rule(severity: str = "broken", functions: tuple[str, ...] = (FN,)) -> RuleEvidence:
    return RuleEvidence("fla-triton-bwd", severity, "fla backward on triton 3.6", "the backward raises",
                        "pip install 'triton<3.6'", functions)


HUB = HubEvidence(FN, "Hub kernel kernels-community/fla GatedDeltaNet (torch29-cxx11-cu128-x86_64-linux)")


def test_binding_alone_is_kept_and_the_prior_is_not_changed():
    prior = bound("fallback", reason="fla-core is not installed")
    out = decide.decide(prior)
    assert out == prior and out is not prior


def test_a_certain_rule_raises_a_fast_function_to_its_severity_with_its_words():
    out = decide.decide(bound(), rules=[rule()])
    assert (out.status, out.reason, out.fix) == ("broken", "fla backward on triton 3.6: the backward raises",
                                                 "pip install 'triton<3.6'")


def test_a_rule_never_lowers_and_skips_unused_or_unnamed_functions():
    assert decide.decide(bound("broken", reason="x"), rules=[rule("fallback")]).reason == "x"
    assert decide.decide(bound("unsupported"), rules=[rule("fallback")]).status == "unsupported"
    assert decide.decide(bound("fast", used=False), rules=[rule()]).status == "fast"
    assert decide.decide(bound(), rules=[rule(functions=("causal_conv1d_fn",))]).status == "fast"
    assert decide.decide(bound(), rules=[rule("warning")]).status == "fast"


def test_the_hub_build_wins_over_binding_and_rules():
    out = decide.decide(bound("fallback", reason="not installed"), rules=[rule()], hub=HUB)
    assert (out.status, out.implementation, out.reason, out.fix) == ("fast", HUB.implementation, None, None)
    # a function whose pip package is fast is replaced too: transformers 5.25 asks the Hub first, then the package
    assert decide.decide(bound(), hub=HUB).implementation == HUB.implementation


HUB3 = HubEvidence(FN, "Hub kernel kernels-community/fla@v3 chunk_gated_delta_rule (torch211-cxx11-cu130-x86_64-linux)",
                   "kernels-community/fla@v3", "torch211-cxx11-cu130-x86_64-linux")
FLA = decide.Build("fla-core", "0.6.0", "fwd Triton, bwd TileLang")


def test_the_provider_is_the_pip_build_where_its_path_runs_and_torch_elsewhere():
    assert decide.decide(bound(), build=FLA).provider == "pip:fla-core 0.6.0 / fwd Triton, bwd TileLang"
    assert decide.decide(bound("broken", reason="x"), build=FLA).provider == FLA.provider
    assert decide.decide(bound("fallback", reason="x"), build=FLA).provider == "torch"
    assert decide.decide(bound("unsupported", reason="cpu"), build=FLA).provider == FLA.provider  # bound, called
    assert decide.decide(bound("unsupported", reason="cpu"), build=decide.TORCH).provider == "torch"
    assert decide.decide(bound(), build=decide.TORCH).provider == "torch"
    assert decide.decide(bound(), build=decide.Build("causal-conv1d", "1.7.0")).provider == "pip:causal-conv1d 1.7.0"
    assert decide.decide(bound()).provider is None  # no build evidence: not decided


def test_a_hub_build_is_the_provider_whatever_the_pip_build_and_keeps_it_after_a_later_build():
    out = decide.decide(decide.decide(bound(), build=FLA), hub=HUB3)
    assert out.provider == "hub:kernels-community/fla@v3 (variant torch211-cxx11-cu130-x86_64-linux)"
    assert decide.decide(out, build=FLA).provider == out.provider
    tl = HubEvidence(*HUB3.__dict__.values())
    tl = decide.HubEvidence(tl.function, tl.implementation, tl.repo, tl.variant, "fwd Triton, bwd TileLang")
    assert decide.decide(out, hub=tl).provider.endswith("(variant torch211-cxx11-cu130-x86_64-linux) / fwd Triton, "
                                                        "bwd TileLang")
    # a rule about the Hub build, given after it, breaks the function and keeps the provider
    broke = decide.decide(out, rules=[rule()])
    assert (broke.status, broke.provider) == ("broken", out.provider)


def test_a_live_run_that_saw_the_torch_path_makes_torch_the_provider():
    out = decide.decide(decide.decide(bound(), build=FLA), observed=Observation({}, "torch", 1, "t"))
    assert out.provider == "torch"


def test_live_evidence_wins_over_everything():
    broke = Observation({"calls": 2}, "fast", 2, "fla.ops.chunk", broken="observed: raised in backward",
                        known_breakage="fla-triton-bwd", fix="pin triton")
    out = decide.decide(bound(), hub=HUB, observed=broke)
    assert (out.status, out.reason, out.fix, out.evidence) == (
        "broken", "observed: raised in backward [known breakage fla-triton-bwd]", "pin triton", {"calls": 2})
    ran = decide.decide(bound("fallback", reason="r"), observed=Observation({}, "fast", 3, "fla.ops.chunk2"))
    assert (ran.status, ran.implementation, ran.reason) == ("fast", "fla.ops.chunk2", None)


def test_a_bound_fast_kernel_whose_torch_reference_ran_is_a_fallback():
    out = decide.decide(bound(), observed=Observation({}, "torch", 1, "torch_chunk_gated_delta_rule"))
    assert out.status == "fallback"
    assert out.reason == ("observed: the torch reference torch_chunk_gated_delta_rule ran although transformers "
                          "bound the fast kernel")
    slow = decide.decide(bound("fallback", reason="not installed"), observed=Observation({}, "torch", 1, "t"))
    assert (slow.status, slow.reason) == ("fallback", "observed: the torch reference ran (t); not installed")


def test_stages_in_turn_decide_as_one_call():
    once = decide.decide(bound(), notes=(" (note)",), rules=[rule()], hub=HUB,
                         observed=Observation({}, "torch", 1, "t"))
    staged = decide.decide(decide.decide(decide.decide(bound(), notes=(" (note)",), rules=[rule()]), hub=HUB),
                           observed=Observation({}, "torch", 1, "t"))
    assert once == staged and once.status == "fallback"


def test_verdict_is_the_worst_of_used_functions_and_findings():
    assert decide.verdict([], []) == Verdict.READY
    assert decide.verdict([bound("broken", used=False)], [Finding("x", "warning", "m")]) == Verdict.READY
    assert decide.verdict([bound("unsupported")], []) == Verdict.FALLBACK
    assert decide.verdict([bound()], [Finding("x", "broken", "m")]) == Verdict.BROKEN
    assert decide.worst("ready", Verdict.FALLBACK) == Verdict.FALLBACK


def test_every_decided_status_is_the_enum_member_not_its_word():
    from kernelcheck.core.status import Status

    torch_ran = Observation({}, "torch", 3, "torch.chunk")
    outs = [decide.decide(bound(), rules=[rule()]), decide.decide(bound("fallback", reason="r"), hub=HUB),
            decide.decide(bound(), observed=Observation({}, "fast", 1, "x", broken="raised")),
            decide.decide(bound("fallback"), observed=Observation({}, "fast", 1, "x")),
            decide.decide(bound(), observed=torch_ran), decide.assume(bound(), "fallback")]
    assert [type(o.status) for o in outs] == [Status] * len(outs)
    assert [o.status for o in outs] == [Status.BROKEN, Status.FAST, Status.BROKEN, Status.FAST, Status.FALLBACK,
                                        Status.FALLBACK]
