"""The vocabulary as types: a function's status, a finding's severity and the job's mode are StrEnums
(core/status.py) that print and compare as their words, so JSON stays byte-for-byte what it was; decision code
writes the members, and every command's --mode is the one shared option (cli/common.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import click
import pytest

from kernelcheck.core.status import Finding, FunctionStatus, Mode, Severity, Status, Verdict
from tests.environments import model_ref

PKG = Path(__file__).resolve().parents[2] / "kernelcheck"
_STATUS_WORDS = {s.value for s in Status} | {s.value for s in Severity}


def test_records_built_from_words_hold_the_members_and_print_the_same_words() -> None:
    fs = FunctionStatus("f", "fla-core", "fallback", "torch_f", "why", None)
    fd = Finding("x", "warning", "m")
    assert fs.status is Status.FALLBACK and fd.severity is Severity.WARNING
    assert FunctionStatus.from_json({"name": "f", "package": "p", "status": "broken",
                                     "implementation": "-"}).status is Status.BROKEN
    assert Finding.from_json({"id": "x", "severity": "info", "message": "m"}).severity is Severity.INFO
    assert (f"{fs.status}", str(fd.severity), fs.status == "fallback") == ("fallback", "warning", True)
    assert json.dumps([fs.status, fd.severity, Mode.TRAIN, {Status.FAST: 1}]) == \
        '["fallback", "warning", "train", {"fast": 1}]'
    with pytest.raises(ValueError):
        Finding("x", "brokn", "m")  # type: ignore[arg-type]  # mypy says so too
    with pytest.raises(ValueError):
        FunctionStatus("f", "p", "slow", "-")  # type: ignore[arg-type]


def test_a_report_prints_the_same_json_as_plain_words() -> None:
    from kernelcheck.report.model import Report, render_json

    def report(status: str, severity: str, mode: str) -> str:
        r = Report("doctor", None, model_ref("m"), mode)
        r.functions.append(FunctionStatus("f", "fla-core", status, "torch_f", "why", "fix"))  # type: ignore[arg-type]
        r.findings.append(Finding("x", severity, "m"))  # type: ignore[arg-type]
        return render_json(r)

    typed = report(Status.FALLBACK, Severity.WARNING, Mode.INFER)
    plain = report("fallback", "warning", "infer")
    assert typed == plain and '"status": "fallback"' in typed and '"mode": "infer"' in typed


def test_every_command_with_mode_uses_the_one_shared_option() -> None:
    from kernelcheck.cli.common import MODE_CHOICE
    from kernelcheck.cli.main import main

    ctx = click.Context(main)
    commands = {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}
    with_mode = {name: next(p for p in cmd.params if p.name == "mode") for name, cmd in commands.items()
                 if cmd is not None and any(p.name == "mode" for p in cmd.params)}
    assert sorted(with_mode) == ["doctor", "hub", "install", "verify", "warm"]
    for name, param in with_mode.items():
        assert param.type is MODE_CHOICE and list(MODE_CHOICE.choices) == ["train", "infer"], name
        assert param.default == "train" and param.callback is not None
        assert param.callback(None, param, "infer") is Mode.INFER  # type: ignore[arg-type]


def _words_in(node: ast.expr) -> list[ast.Constant]:
    """The status/severity word literals `node` is or chooses between (`"info" if x else "warning"`)."""
    if isinstance(node, ast.IfExp):
        return _words_in(node.body) + _words_in(node.orelse)
    return [node] if isinstance(node, ast.Constant) and node.value in _STATUS_WORDS else []


def _literal_words(tree: ast.AST) -> list[str]:
    """Status/severity words written as literals where decision code compares or builds a record (positionally,
    as a severity=/status= keyword or a "verdict"/"status"/"severity" key), and modes compared as words."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and any(k.arg in ("severity", "status") and _words_in(k.value) for k in n.keywords):
            out.append(ast.unparse(n)[:80])
        if isinstance(n, ast.Dict) and any(isinstance(k, ast.Constant) and k.value in ("verdict", "status", "severity")
                                           and (_words_in(v) or (isinstance(v, ast.Constant) and v.value == "ready"))
                                           for k, v in zip(n.keys, n.values, strict=True)):
            out.append(ast.unparse(n)[:80])
        if isinstance(n, ast.Compare) and isinstance(n.left, ast.Attribute) and n.left.attr in ("status", "severity"):
            for c in n.comparators:
                elts = c.elts if isinstance(c, (ast.Tuple, ast.List, ast.Set)) else [c]
                out += [ast.unparse(n) for e in elts if isinstance(e, ast.Constant) and e.value in _STATUS_WORDS]
        if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] in ("Finding", "FunctionStatus", "Why"):
            pos = {"Finding": 1, "FunctionStatus": 2, "Why": 2}[ast.unparse(n.func).split(".")[-1]]
            if len(n.args) > pos and _words_in(n.args[pos]):
                out.append(ast.unparse(n)[:80])
        if isinstance(n, ast.Compare) and ast.unparse(n.left).split(".")[-1] == "mode" and any(
                isinstance(c, ast.Constant) and c.value in ("train", "infer") for c in n.comparators):
            out.append(ast.unparse(n))
    return out


def test_the_catalogue_finds_a_status_word_written_as_a_literal() -> None:
    got = _literal_words(ast.parse('a = fs.status != "fast"\nb = fd.severity in ("broken", "x")\n'
                                   'c = Finding("id", "info", "m")\nd = FunctionStatus(f, p, "broken", "-")\n'
                                   'e = mode == "train"\nf = fs.status == Status.FAST\ng = path == "fast"\n'
                                   'h = Finding("id", "warning" if x else "info", "m")\n'
                                   'i = Step(a, severity="broken")\nj = {"verdict": "ready", "x": 1}\n'
                                   'k = self.mode != "infer"\nl = {"path": "fast"}\n'))
    assert len(got) == 9, got


# core/manifest.py's words type-check against the Literals.
_LEFT = {"core/manifest.py"}


def test_decision_code_writes_the_members_not_the_words() -> None:
    found = [f"{p.relative_to(PKG)}: {hit}" for p in sorted(PKG.rglob("*.py"))
             if str(p.relative_to(PKG)) not in _LEFT
             for hit in _literal_words(ast.parse(p.read_text()))]
    assert found == [], "; ".join(found)
    chosen = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if 'click.Choice(["train", "infer"])' in p.read_text()]
    assert chosen == [], chosen


_VERDICT_WORDS = _STATUS_WORDS | {v.value for v in Verdict}


def _verdict_tables(tree: ast.AST) -> list[str]:
    """Copies of core/status.py's tables: a dict from exit codes (keys 3 and 4 among ints) or a ranking (status or
    verdict words to ints), and an exit code compared with a literal 3 or 4."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Dict) and n.keys and all(isinstance(k, ast.Constant) for k in n.keys):
            keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
            ranked = keys <= _VERDICT_WORDS | {None} and all(isinstance(v, ast.Constant) and type(v.value) is int
                                                             for v in n.values)
            if ranked or (all(type(k) is int for k in keys) and {3, 4} <= keys):
                out.append(ast.unparse(n)[:80])
        if isinstance(n, ast.Compare) and "code" in ast.unparse(n.left) and any(
                isinstance(c, ast.Constant) and c.value in (3, 4) for c in n.comparators):
            out.append(ast.unparse(n))
    return out


def test_the_catalogue_finds_a_copy_of_the_exit_code_table_or_a_ranking() -> None:
    got = _verdict_tables(ast.parse('a = {0: "READY", 3: "FALLBACK", 4: "BROKEN"}\nb = {"fallback": 1, "broken": 2}\n'
                                    'c = {"ready": 0, "fallback": 1}\nd = exc.exit_code == 4\ne = {0: "x", 1: "y"}\n'
                                    'f = {"fast": "a"}\ng = n == 4\n'))
    assert len(got) == 4, got


def test_the_exit_codes_and_the_ranking_live_in_core_status_only() -> None:
    found = [f"{p.relative_to(PKG)}: {hit}" for p in sorted(PKG.rglob("*.py")) if p.relative_to(PKG) !=
             Path("core/status.py") for hit in _verdict_tables(ast.parse(p.read_text()))]
    assert found == [], "; ".join(found)


@pytest.mark.parametrize("kernels_importable", [True, False])
def test_the_hub_mapping_reads_the_jobs_mode_beside_kernels_own_mode_class(monkeypatch, kernels_importable) -> None:
    """kernels has a Mode of its own (TRAINING, INFERENCE): the job's Mode.TRAIN is not one of its members."""
    import sys

    from kernelcheck.integrations import transformers_hub

    if not kernels_importable:
        monkeypatch.setitem(sys.modules, "kernels", None)
    assert transformers_hub._mode_priority(Mode.TRAIN)[0] == ("TRAINING",)
    assert transformers_hub._mode_priority("infer")[0] == ("INFERENCE",)
