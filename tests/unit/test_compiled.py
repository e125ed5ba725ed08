"""verify --compile's decisions and its section (verify/compiled.py, report/compiled.py) with explicit values: the
breaks read from a Dynamo explain result, the fix for each, the findings a section gives, the JSON read back, and
the text (its wording is tested here once). The real run is tests/integration/test_compiled.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
