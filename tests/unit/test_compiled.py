"""verify --compile's decisions and its section (verify/compiled.py, report/compiled.py) with explicit values: the
breaks read from a Dynamo explain result, the fix for each, the findings a section gives, the JSON read back, and
the text (its wording is tested here once). The real run is tests/integration/test_compiled.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core.status import Severity
from kernelcheck.integrations import fla_dispatch
from kernelcheck.report.compiled import CompiledPass, CompiledSection, GraphBreak, PartRun
from kernelcheck.verify import compiled


@dataclass
class Frame:
    filename: str
    lineno: int
    name: str


@dataclass
class Reason:
    reason: str
    user_stack: list[Frame]


@dataclass
class Explain:
    break_reasons: list[Reason]


DISABLE = ("Skip calling `torch.compiler.disable()`d function\n  Explanation: Skip calling function `<function "
           "chunk_gated_delta_rule>` since it was wrapped with `torch.compiler.disable` (reason: None)\n  Hint: x")
MODELING = Frame("/sp/site-packages/transformers/models/qwen3_5/modeling_qwen3_5.py", 587, "forward")
FLA = Frame("/sp/site-packages/fla/backends.py", 203, "wrapper")
WRAP = fla_dispatch.CompileWrap(("chunk_gated_delta_rule",), True, "ref")


def test_breaks_are_grouped_with_their_innermost_and_modeling_frames() -> None:
    ex = Explain([Reason(DISABLE, [MODELING, FLA]), Reason(DISABLE, [MODELING, FLA]),
                  Reason("data-dependent branching", [MODELING])])
    got = compiled.breaks_of(ex, WRAP)
    assert [(b.count, b.where, b.model_frame) for b in got] == [
        (2, "fla/backends.py:203 in wrapper", "transformers/models/qwen3_5/modeling_qwen3_5.py:587 in forward"),
        (1, "transformers/models/qwen3_5/modeling_qwen3_5.py:587 in forward",
         "transformers/models/qwen3_5/modeling_qwen3_5.py:587 in forward")]
    assert got[0].reason == "Skip calling `torch.compiler.disable()`d function"
    assert got[0].explanation and got[0].explanation.startswith("Skip calling function")


def test_the_fix_follows_the_break_and_what_fla_ships() -> None:
    in_fla = compiled.fix_for(DISABLE, [MODELING.filename, FLA.filename], WRAP)
    assert in_fla is not None and in_fla.startswith("FLA_DISABLE_BACKEND_DISPATCH=1")
    no_switch = fla_dispatch.CompileWrap(("chunk_gated_delta_rule",), False, "ref")
    other = compiled.fix_for(DISABLE, [MODELING.filename, FLA.filename], no_switch)
    assert other is not None and other.startswith("wrap the function in a torch.library.custom_op")
    assert "layer.compile()" in (compiled.fix_for("data-dependent branching", [MODELING.filename], WRAP) or "")


def test_compile_wrap_reads_the_installed_fla_dispatch(tmp_path: Path) -> None:
    root = tmp_path / "fla"
    (root / "ops" / "gated_delta_rule").mkdir(parents=True)
    (root / "backends.py").write_text("_DISPATCH_DISABLED = x\n    if _DISPATCH_DISABLED:\n"
                                      "        return default_function\n"
                                      "        return torch.compiler.disable(wrapper)\n")
    (root / "ops" / "gated_delta_rule" / "chunk.py").write_text(
        "@dispatch('gated_delta_rule')\ndef chunk_gated_delta_rule(q):\n    pass\n")
    got = fla_dispatch.compile_wrap(("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"), root)
    assert got is not None and (got.functions, got.switch) == (("chunk_gated_delta_rule",), True)
    (root / "backends.py").write_text("return wrapper\n")
    assert fla_dispatch.compile_wrap(("chunk_gated_delta_rule",), root) is None


@pytest.mark.parametrize(("decorators", "kinds", "switch", "in_graph"), [
    ("@torch.compiler.disable\n@dispatch('gated_delta_rule')\n", ("decorator", "dispatch"), False, ()),  # fla 0.6.0
    ("@dispatch('gated_delta_rule')\n", ("dispatch",), True, ()),
    ("@torch._dynamo.disable\n", ("decorator",), False, ()),
    ("@torch.library.custom_op('fla::chunk_gdr', mutates_args=())\n", None, None, ("custom_op",)),
    ("@torch.compiler.allow_in_graph\n@dispatch('gated_delta_rule')\n", None, None, ("allow_in_graph",)),
])
def test_compile_wrap_tells_the_ops_own_decorator_from_the_dispatch_and_from_ops_kept_in_the_graph(
        tmp_path: Path, decorators: str, kinds: tuple[str, ...] | None, switch: bool | None,
        in_graph: tuple[str, ...]) -> None:
    """FLA_DISABLE_BACKEND_DISPATCH=1 unwraps only the dispatch: an op with its own @torch.compiler.disable (fla
    0.6.0's chunk_gated_delta_rule) still breaks the graph; a custom op or allow_in_graph stays in it."""
    root = tmp_path / "fla"
    (root / "ops" / "gated_delta_rule").mkdir(parents=True)
    (root / "backends.py").write_text("_DISPATCH_DISABLED = x\n        return default_function\n"
                                      "        return torch.compiler.disable(wrapper)\n")
    op = root / "ops" / "gated_delta_rule" / "chunk.py"
    op.write_text(f"{decorators}def chunk_gated_delta_rule(q):\n    pass\n")
    got = fla_dispatch.compile_wrap(("chunk_gated_delta_rule",), root)
    if kinds is None:
        assert got is None
        assert fla_dispatch.op_wrapping("chunk_gated_delta_rule", root, True) == in_graph[0]
    else:
        assert got is not None and got.kinds == (("chunk_gated_delta_rule", kinds),) and got.switch is switch


def _section(*parts: PartRun, breaks: int = 0, error: str | None = None) -> CompiledSection:
    b = [GraphBreak("Skip calling", "why", "a.py:1 in f", "m.py:2 in forward", breaks, "fix it")] if breaks else []
    return CompiledSection("aot_eager", "tiny", "cpu", "float32", 64,
                           [CompiledPass("train", 1 + breaks, b, list(parts), 10.0, 5.0, 3.2, error)])


def test_findings_say_eager_parts_breaks_clean_runs_and_failures() -> None:
    loop_eager = _section(PartRun("decoder-loop", "TextModel", 1, 1), PartRun("gdn-layer", "GDN", 3, 3), breaks=3)
    got = compiled.findings(loop_eager, "q")
    assert [(f.id, f.severity, f.fix) for f in got] == [("compile-runs-eager", Severity.FALLBACK, "fix it")]
    compiled_ok = _section(PartRun("decoder-loop", "TextModel", 1, 0), PartRun("gdn-layer", "GDN", 3, 0), breaks=3)
    assert [f.id for f in compiled.findings(compiled_ok, "q")] == ["compile-graph-breaks"]
    clean = _section(PartRun("decoder-loop", "TextModel", 1, 0))
    assert [(f.id, f.severity) for f in compiled.findings(clean, "q")] == [("compile-ok", Severity.INFO)]
    failed = _section(error="Unsupported: x")
    assert [(f.id, f.severity) for f in compiled.findings(failed, "q")] == [("compile-failed", Severity.BROKEN)]


def test_the_section_reads_back_and_writes_its_lines() -> None:
    sec = _section(PartRun("decoder-loop", "TextModel", 1, 1), PartRun("gdn-layer", "GDN", 0, 0), breaks=2)
    assert CompiledSection.from_json(sec.to_json()) == sec
    assert sec.to_json()["passes"][0]["graph_breaks"] == 2
    assert sec.lines == [
        "torch.compile (backend aot_eager), tiny shape on cpu (float32), 64 tokens",
        "train: 3 graph(s), 2 graph break(s); compiled 5.0 ms vs eager 10.0 ms per step (compile 3.2 s)",
        "  decoder-loop (TextModel): ran eagerly (1 of 1 calls)",
        "  gdn-layer (GDN): not called",
        "  break x2: Skip calling at a.py:1 in f (from m.py:2 in forward)",
        "    why: why",
        "    fix: fix it",
    ]


# -- the positive control: did the compiled run reach the fused op at all (verify/compiled_calls.py) ---------------
def _hub_wrapper(impl: Any, ref: Any) -> Any:
    """The shape of transformers' hub-kernel wrapper: closure cells `implementation` and `torch_function`."""
    implementation, torch_function = impl, ref

    def wrapper(*a, **k):  # type: ignore[no-untyped-def]
        return (implementation or torch_function)(*a, **k)

    return wrapper


def _reference(x: Any) -> Any:
    return x * 2


def _count(fast: Any) -> tuple[Any, int]:
    """Eager steps then a compiled run (aot_eager, 3 calls) of a real module calling the op through the wrapper."""
    import types

    import torch

    from kernelcheck.verify.compiled_calls import FusedCalls

    mod = types.SimpleNamespace(op=_hub_wrapper(fast, _reference))
    lin = torch.nn.Linear(4, 4)

    def forward(x: Any) -> Any:
        return torch.sin(mod.op(lin(x)) + 1)

    fused = FusedCalls(mod, {"op": types.SimpleNamespace(extra={"attribute": "op"})}, ("op",))
    x = torch.ones(2, 4)
    with fused.counting(compiled=False) as eager:
        for _ in range(3):
            forward(x)
    torch._dynamo.reset()
    breaks = torch._dynamo.explain(forward)(x).graph_break_count
    torch._dynamo.reset()
    with fused.counting(compiled=True) as comp:
        f = torch.compile(forward, backend="aot_eager")
        for _ in range(3):
            f(x)
    torch._dynamo.reset()
    assert mod.op.__closure__[0].cell_contents in (fast, _reference)  # the cells are put back
    return FusedCalls.report(eager, comp, 3)[0], breaks


def test_a_compiler_disabled_fast_op_breaks_the_graph_and_is_counted_as_reached_and_run() -> None:
    import torch

    calls = [0]

    @torch.compiler.disable
    def fast(x):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return x * 2

    op, breaks = _count(fast)
    assert (op.function, op.calls, op.compiler_disabled) == ("op", 1, True)
    assert op.fast is not None and op.fast.endswith("fast")
    assert op.exercised and op.traced >= 1 and op.runs == 3  # each compiled call ran the op, as Python
    assert breaks >= 1  # the disabled op breaks the graph, and the compiled run still reached and ran it


def test_a_fast_op_that_breaks_the_graph_is_counted_with_its_break() -> None:
    import torch

    def fast(x):  # type: ignore[no-untyped-def]
        torch._dynamo.graph_break()
        return x * 2

    op, breaks = _count(fast)
    assert breaks >= 1 and op.exercised and op.calls == 1


def test_an_op_bound_to_its_torch_reference_is_not_exercised_by_the_compiled_run() -> None:
    op, _ = _count(None)  # the package is absent: transformers runs the reference
    assert op.fast is None and op.calls == 1 and not op.exercised and op.traced == op.runs == 0


def test_the_control_says_not_exercised_or_contradicted_and_never_reads_0_breaks_as_agreement() -> None:
    from kernelcheck.core.status import Finding
    from kernelcheck.report.compiled import OpCalls

    static = Finding("compile-graph-breaks-static", Severity.INFO, "x", None, None, ("chunk_gated_delta_rule",))
    reached = OpCalls("chunk_gated_delta_rule", "fla.ops.gated_delta_rule.chunk.chunk_gated_delta_rule", True, 3,
                      2, 9)
    absent = OpCalls("chunk_gated_delta_rule", None, False, 3, 0, 0)
    unused = OpCalls("causal_conv1d_update", None, False, 0, 0, 0)

    def ids(op: OpCalls, breaks: int = 0) -> list[tuple[str, Severity, tuple[str, ...]]]:
        b = [GraphBreak("Skip calling", "why", "a.py:1 in f", None, breaks)] if breaks else []
        sec = CompiledSection("inductor", "full", "cuda:0", "bfloat16", 2048,
                              [CompiledPass("train", 1 + breaks, b, [], 10.0, 5.0, 3.2, None, [op, unused])])
        return [(f.id, Severity(f.severity), f.functions) for f in compiled.findings(sec, "q", static)
                if f.id.startswith("compile-op") or f.id.startswith("compile-static")]

    fn = ("chunk_gated_delta_rule",)
    assert ids(reached) == [("compile-static-contradicted", Severity.INFO, fn)]
    assert ids(reached, breaks=3) == []  # reached, and it breaks: the static reading agrees
    assert ids(absent) == [("compile-op-not-exercised", Severity.FALLBACK, fn)]
    assert ids(absent, breaks=3) == [("compile-op-not-exercised", Severity.FALLBACK, fn)]
    sec = CompiledSection("inductor", "full", "cuda:0", "bfloat16", 2048,
                          [CompiledPass("train", 1, [], [], 10.0, 5.0, 3.2, None, [reached, absent, unused])])
    assert CompiledSection.from_json(sec.to_json()) == sec
    assert sec.to_json()["passes"][0]["fused_ops"][1] == {
        "function": "chunk_gated_delta_rule", "fast": None, "compiler_disabled": False, "calls": 3, "traced": 0,
        "runs": 0, "exercised": False}
    assert sec.lines[2:] == [
        "  chunk_gated_delta_rule (3 call(s) per step): fast implementation reached 2x while tracing, ran 9x "
        "(torch.compiler.disable: run eagerly)",
        "  chunk_gated_delta_rule (3 call(s) per step): NOT exercised by the compiled run (no fast implementation "
        "bound: the torch reference ran)"]
