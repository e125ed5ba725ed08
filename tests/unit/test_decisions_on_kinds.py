"""Decisions branch on kinds, never on wording: no code in kernelcheck/ tests the English of a reason,
message or note to decide something; it reads an id, a kind field or a typed value the words were made with."""

from __future__ import annotations

import ast
from pathlib import Path

from kernelcheck.core import matrix

PKG = Path(__file__).resolve().parents[2] / "kernelcheck"

# Names that hold words made for a person (a record's reason/message/note, a local that holds one).
_WORDING = {"message", "messages", "reason", "reasons", "why", "note", "notes", "title", "msg", "words", "hint"}
_TEXT_TESTS = {"startswith", "endswith", "find", "rfind", "index", "count"}
_STR_METHODS = {"lower", "upper", "strip", "lstrip", "rstrip", "casefold"}
# Text that is not ours: another project's log line (huggingface_hub's retry chatter), read where it arrives;
# Dynamo's graph-break reason (torch._dynamo.explain gives it only as text), read where verify --compile gets it.
_FOREIGN = {("core/models.py", "msg.startswith('Retrying')"),
            ("verify/compiled.py", "'torch.compiler.disable' in reason")}


def _holder(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The name a text value is held under: `fs.reason` -> reason, `d["message"]` -> message, `n` -> what the
    comprehension that binds `n` iterates (`for n in res.notes` -> notes)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
        return _holder(node.func.value, aliases)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    return None


def _aliases(tree: ast.AST) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.comprehension) and isinstance(n.target, ast.Name):
            held = _holder(n.iter, {})
            if held in _WORDING:
                out[n.target.id] = held
    return out


def wording_tests(source: str) -> list[str]:
    """Each place in `source` that decides on the words of a reason/message/note: `"..." in x.reason`,
    `x.message.startswith(...)`, `n.startswith(...) for n in res.notes`."""
    tree = ast.parse(source)
    aliases, found = _aliases(tree), []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare) and isinstance(n.left, ast.Constant) and isinstance(n.left.value, str):
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops) and \
                    any(_holder(c, aliases) in _WORDING for c in n.comparators):
                found.append(ast.unparse(n))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _TEXT_TESTS \
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str) \
                and _holder(n.func.value, aliases) in _WORDING:
            found.append(ast.unparse(n))
    return found


def test_the_catalogue_finds_each_way_of_deciding_on_words() -> None:
    caught = wording_tests(
        "a = 'not installed' in fs.reason\n"
        "b = s.reason.startswith('dependency')\n"
        "c = next((n for n in res.notes if n.startswith('the Hub could not be asked')), None)\n"
        "d = 'x' not in f.message.lower()\n"
        "e = 'y' in row['message']\n"
        "f = why.endswith('.')\n")
    assert len(caught) == 6, caught
    # what is not wording: ids, kinds, keys, and text made elsewhere (a version, a device name)
    assert wording_tests("a = f.id == 'x'\nb = 'error' in found\nc = device.startswith('cuda')\n"
                         "d = s.role == Role.DEPENDENCY\ne = 'repo' in row\n") == []


def test_no_decision_in_kernelcheck_branches_on_the_words_of_a_reason_message_or_note() -> None:
    found = [f"{rel}: {hit}" for p in sorted(PKG.rglob("*.py"))
             for hit in wording_tests(p.read_text())
             if ((rel := str(p.relative_to(PKG))), hit) not in _FOREIGN]
    assert found == [], ("decide on an id, a kind field or a typed value (Step.role, Decision.needs_trial, "
                         "FunctionStatus.cause, Resolution.hub_unreachable), not on words: " + "; ".join(found))


# --- each decision that read words now reads a value (explicit inputs, in-process) ------------------------------

def test_a_second_live_observation_keeps_the_words_the_first_one_wrote() -> None:
    from kernelcheck.core import decide
    from kernelcheck.core.decide import Observation
    from kernelcheck.core.status import FunctionStatus

    prior = FunctionStatus("f", "fla-core", "fallback", "torch_f", "fla-core is not installed", None)
    ran = Observation({"calls": 1}, "torch", 1, "torch_f")
    once = decide.decide(prior, observed=ran)
    assert once.reason == "observed: the torch reference ran (torch_f); fla-core is not installed"
    assert decide.decide(once, observed=ran) == once  # decided on the evidence already there, not on "observed"
    # a reason that merely starts with the word, but no live run seen yet, still gets what was observed
    worded = FunctionStatus("f", "fla-core", "fallback", "torch_f", "observed in an earlier job", None)
    assert decide.decide(worded, observed=ran).reason == "observed: the torch reference ran (torch_f); observed " \
                                                         "in an earlier job"


def test_the_unsloth_note_goes_to_fla_functions_whose_cause_is_not_installed() -> None:
    from kernelcheck.core import matrix
    from kernelcheck.core.status import Cause, FunctionStatus
    from kernelcheck.doctor.run import _UNSLOTH_NOTE, _unsloth_noted

    missing = FunctionStatus("chunk_gated_delta_rule", "fla-core", "fallback", "torch_chunk", "fla-core is absent",
                             "pip install fla-core", cause=Cause.NOT_INSTALLED)
    worded = FunctionStatus("fused_recurrent_gated_delta_rule", "fla-core", "fallback", "torch_rec",
                            "registered under a name fla does not export (fla is not installed either)", None)
    other = FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fallback", "torch_conv", "not installed", None,
                           cause=Cause.NOT_INSTALLED)
    got = _unsloth_noted([missing, worded, other], matrix.load())
    assert got[0].reason == "fla-core is absent" + _UNSLOTH_NOTE and got[0].cause == Cause.NOT_INSTALLED
    assert got[1:] == [worded, other]  # the words "not installed" alone decide nothing


def test_why_torch_says_not_installed_as_a_cause_and_the_json_does_not_print_it() -> None:
    from kernelcheck.core import matrix as matrix_mod
    from kernelcheck.core.device import choose
    from kernelcheck.core.status import Cause, FunctionStatus
    from kernelcheck.doctor.why import Why, _why_not_installed
    from kernelcheck.report.model import _drop_none
    from tests.environments import make_env

    env = make_env("9.0")
    got = _why_not_installed(matrix_mod.load().packages["fla"], env, "qwen3.8-27b", choose(env))
    assert isinstance(got, Why) and (got.status, got.cause) == ("fallback", Cause.NOT_INSTALLED)
    reason, fix, status, *_ = got
    fs = FunctionStatus("f", "fla-core", status, "torch_f", reason, fix, cause=got.cause)
    from dataclasses import asdict

    assert "cause" not in _drop_none(asdict(fs)) and FunctionStatus.from_json(_drop_none(asdict(fs))).cause is None


def test_dependencies_go_first_and_fixes_are_counted_by_role_not_by_words(tmp_path: Path) -> None:
    from kernelcheck.core.plan_step import Role
    from kernelcheck.install import plan
    from tests.unit.test_install_plan import env, fla_candidates

    p = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), model="qwen3.8-27b",
                                                     fixes=False), fla_candidates(tmp_path))
    roles = {s.package: s.role for s in p.steps}
    assert roles == {"einops": Role.DEPENDENCY, "fla-core": Role.PACKAGE, "tilelang": Role.FIX, "triton": Role.FIX}
    assert p.steps[0].package == "einops"
    assert all("role" not in s.to_json() for s in p.steps)
    # a step whose words start like a dependency's is ordered by its role
    worded = plan.Step("x", "install", "pypi", "x==1", "dependency-free package", kind=plan.StepKind.NEWEST_COMPATIBLE)
    assert worded.role == Role.PACKAGE


def test_an_unlabelled_compiled_wheel_without_a_trial_says_it_needs_one_as_a_field(tmp_path: Path) -> None:
    import sysconfig

    from kernelcheck.install import wheels
    from tests.kcfixtures import PY_TAG, make_wheel

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    info = wheels.inspect_wheel(make_wheel(tmp_path, "causal-conv1d", "1.7.0",
                                           files={f"causal_conv1d_cuda{suffix}": b"not elf"}))
    assert info is not None
    gpu = wheels.WheelInfo(**{**info.__dict__, "so_arches": {k: ("sm_90",) for k in info.so_arches}})
    host = wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", 13, True, ("9.0",))
    untried = wheels.match(gpu, host, extension="causal_conv1d_cuda")
    assert (untried.accepted, untried.needs_trial) == (False, True)
    tried = wheels.match(gpu, host, extension="causal_conv1d_cuda",
                         trial=wheels.TrialImport("causal_conv1d_cuda", False, "undefined symbol: x", "2.14.1"))
    assert (tried.accepted, tried.needs_trial) == (False, False)


def test_the_hub_failure_is_a_field_of_the_resolution_not_a_note_read_back(monkeypatch) -> None:
    from kernelcheck.hub.check import _judge
    from kernelcheck.integrations.kernels_hub import Resolution
    from kernelcheck.report.hub import HubRow

    for v in ("HF_HUB_OFFLINE", "KERNELCHECK_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    said = "the Hub could not be asked (ConnectionError: x); the Hugging Face cache answered instead"
    group = [HubRow("chunk_gated_delta_rule", "function", True, layer="GatedDeltaNet")]
    failed = Resolution("kernels-community/fla", 1, None, "hf-cache", "/c", notes=(said,), hub_unreachable=said)
    findings: list = []
    assert _judge(findings, group, failed, True, {}, "qwen3.8-27b", m=matrix.load()) == []
    assert [(f.id, f.severity) for f in findings] == [("hub-unreachable", "broken")]
    assert "hub_unreachable" not in failed.to_json() and failed.to_json()["notes"] == [said]
    # the same words as a plain note (no failure recorded) decide nothing
    noted = Resolution("kernels-community/fla", 1, None, "hf-cache", "/c", notes=(said,))
    findings = []
    _judge(findings, group, noted, True, {}, "qwen3.8-27b", m=matrix.load())
    assert "hub-unreachable" not in [f.id for f in findings]


def test_a_named_pipe_is_named_by_its_kind(tmp_path: Path) -> None:
    import os

    import pytest

    from kernelcheck.core import paths
    from kernelcheck.core.errors import BadInput

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert paths.kind(fifo) == paths.FIFO
    with pytest.raises(BadInput, match="waits for a writer"):
        paths.regular_file(fifo, "the trace", "give a file")
