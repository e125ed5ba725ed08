"""The catalogue of finding ids (kernelcheck/core/findings_catalogue.py) is the code's: every `Finding(...)` the
package builds has its id there, with the severity it is built with, and every id there is built somewhere.

The scan reads the package's source (AST): a literal id is looked up; an f-string id by its shape (`install-{}`)
among the families; a module constant by its value; an id taken from data (`hit.rule.id`, a signature's `m.id`)
by the data it comes from, whose ids the catalogue reads from matrix/*.toml.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kernelcheck.core import findings_catalogue as cat
from kernelcheck.core import matrix as matrix_mod
from kernelcheck.core.status import Severity
from tests import sources

PKG = Path(cat.__file__).resolve().parent.parent
DOC = PKG.parent / "docs" / "findings.md"

# An id read from a value, not written in the code: the expression -> what it is (its ids are data_entries')
FROM_DATA = {
    "hit.rule.id": "breakage",  # doctor/run.py: a [[breakage]] that applies
    "h.rule.id": "breakage",  # doctor/fixcheck.py: the rules a fix leaves
    "rule.id": "import_error",  # doctor/run.py: the [[import_error]] an import error matches
    "m.id": "signature",  # trace/verdicts.py: a matched [[signature]]
    "f.id": "again",  # doctor/fixcheck.py: an existing finding with a note added
}


@dataclass
class Scan:
    literal: dict[str, set[str]] = field(default_factory=dict)  # id -> "file:line" (its severity checked apart)
    patterns: dict[str, set[str]] = field(default_factory=dict)  # f-string shape -> where
    data: set[str] = field(default_factory=set)  # FROM_DATA kinds seen
    severities: list[tuple[str, Severity, str]] = field(default_factory=list)  # (id or shape, severity, where)
    unknown: list[str] = field(default_factory=list)  # id expressions the scan cannot read


def _shape(node: ast.JoinedStr) -> str:
    return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _constants(tree: ast.Module) -> dict[str, str]:
    return {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str) for t in n.targets if isinstance(t, ast.Name)}


def _ids(node: ast.expr, consts: dict[str, str]) -> list[tuple[str, str]]:
    """(kind, value) for each id an id expression can be: literal, pattern, data or unknown."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [("literal", node.value)]
    if isinstance(node, ast.Name) and node.id in consts:
        return [("literal", consts[node.id])]
    if isinstance(node, ast.JoinedStr):
        return [("pattern", _shape(node))]
    if isinstance(node, ast.IfExp):
        return _ids(node.body, consts) + _ids(node.orelse, consts)
    if ast.unparse(node) in FROM_DATA:
        return [("data", FROM_DATA[ast.unparse(node)])]
    return [("unknown", ast.unparse(node))]


def _severities(node: ast.expr | None) -> list[Severity]:
    """The severities a severity expression can be, when it is written out ("broken", Severity.BROKEN)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [Severity(node.value)]
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "Severity":
        return [Severity[node.attr]]
    if isinstance(node, ast.IfExp):
        return _severities(node.body) + _severities(node.orelse)
    return []


def _arg(call: ast.Call, i: int, name: str) -> ast.expr | None:
    return call.args[i] if len(call.args) > i else next((k.value for k in call.keywords if k.arg == name), None)


def scan(pkg: Path = PKG) -> Scan:
    out = Scan()
    for path in sorted(pkg.rglob("*.py")):
        tree = sources.tree(path)
        consts = _constants(tree)
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None))
                    == "Finding"):
                continue
            where = f"{path.relative_to(pkg.parent)}:{call.lineno}"
            id_node = _arg(call, 0, "id")
            if id_node is None:
                out.unknown.append(f"{where}: no id")
                continue
            for kind, value in _ids(id_node, consts):
                if kind == "unknown":
                    out.unknown.append(f"{where}: id {value}")
                elif kind == "data":
                    out.data.add(value)
                else:
                    getattr(out, "literal" if kind == "literal" else "patterns").setdefault(value, set()).add(where)
                    out.severities += [(value, s, where) for s in _severities(_arg(call, 1, "severity"))]
    return out


@pytest.fixture(scope="module")
def scanned() -> Scan:
    return scan()


def _families() -> dict[str, cat.Entry]:
    return {e.pattern: e for e in cat.ENTRIES if e.pattern != e.id}


def _singles() -> dict[str, cat.Entry]:
    return {e.id: e for e in cat.ENTRIES if e.pattern == e.id}


def test_every_id_expression_can_be_read(scanned: Scan) -> None:
    assert scanned.unknown == [], ("a Finding whose id the scan cannot read: write it as a literal, an f-string, "
                                   "a module constant, or add its expression to FROM_DATA")


def test_every_emitted_id_is_in_the_catalogue(scanned: Scan) -> None:
    missing = {i: sorted(w) for i, w in scanned.literal.items() if i not in _singles() and i not in cat.INTERNAL}
    missing |= {p: sorted(w) for p, w in scanned.patterns.items() if p not in _families()}
    assert missing == {}, "add these ids to kernelcheck/core/findings_catalogue.py ENTRIES (and docs/findings.md)"


def test_every_catalogue_id_is_emitted(scanned: Scan) -> None:
    never = [i for i in _singles() if i not in scanned.literal]
    never += [e.id for p, e in _families().items() if p not in scanned.patterns]
    assert never == [], "the catalogue lists ids no code builds: remove them"
    assert sorted(scanned.data) == sorted(set(FROM_DATA.values()))


def test_every_built_severity_is_the_catalogues(scanned: Scan) -> None:
    entries = {**_singles(), **_families()}
    wrong = [f"{where}: {i} built {s}, catalogue {entries[i].severities}" for i, s, where in scanned.severities
             if i in entries and s not in entries[i].severities]
    assert wrong == []


def test_families_with_known_members_match_their_data() -> None:
    modes = matrix_mod.load().table("packing.toml")["modes"]
    assert _families()["packing-{}"].members == tuple(modes)


def test_ids_of_the_data_are_read_from_the_data() -> None:
    m = matrix_mod.load()
    sig = m.signatures
    ids = cat.all_ids(m, sig)
    for b in m.breakages:
        assert ids[b.id] == tuple(dict.fromkeys((b.severity, Severity.WARNING)))
    assert ids["missing-triton"] == (Severity.WARNING,)  # an [[import_error]]
    assert ids["fla-torch-fallback"] == (Severity.FALLBACK, Severity.INFO)  # a [[signature]]
    assert {"step-fla-torch-fallback", "advice-causal-conv1d", "causal-conv1d-kernels-ran",
            "causal_conv1d-import-fails", "install-refuse", "hub-prefetch-skipped", "packing-position_ids"} <= set(ids)


def test_ids_are_lowercase_words_joined_by_dashes() -> None:
    m = matrix_mod.load()
    sig = m.signatures
    bad = [i for i in cat.all_ids(m, sig) if not re.fullmatch(r"[a-z0-9][a-z0-9_]*(-[a-z0-9_]+)*", i)]
    assert bad == []


def test_the_scan_reads_each_way_of_writing_an_id(tmp_path: Path) -> None:
    """The scan reads each way of writing an id (so the tests above can fail)."""
    pkg = tmp_path / "kc"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        'X = "const-id"\n'
        'def f(a, hit):\n'
        '    return [Finding("lit-id", "info", ""), Finding(f"fam-{a}", Severity.BROKEN, ""), Finding(X, "info", ""),\n'
        '            Finding(hit.rule.id, "warning", ""), Finding(a.b, "info", ""),\n'
        '            Finding("one" if a else "two", "broken" if a else "info", "")]\n')
    s = scan(pkg)
    assert set(s.literal) == {"lit-id", "const-id", "one", "two"}
    assert set(s.patterns) == {"fam-{}"}
    assert s.data == {"breakage"}
    assert s.unknown == ["kc/m.py:4: id a.b"]
    assert ("fam-{}", Severity.BROKEN, "kc/m.py:3") in s.severities
    assert {("one", Severity.BROKEN, "kc/m.py:5"), ("one", Severity.INFO, "kc/m.py:5")} <= set(s.severities)


def test_docs_findings_md_is_the_catalogue() -> None:
    assert DOC.read_text(encoding="utf-8") == cat.markdown(), (
        "docs/findings.md is generated: python -m kernelcheck.core.findings_catalogue > docs/findings.md")
