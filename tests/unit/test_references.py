"""What a user is pointed at exists. Every reference a finding can print (the rules, signatures and measurements of
the shipped matrix, the literals in kernelcheck/, the reports kernelcheck printed) names a URL, a released package's
file, a measurement record that is in the repository (docs/measurements/NAME) or a file the wheel ships: never a
repository path the wheel lacks. No product file names a facts file outside the repository, and no prose of docs/,
matrix/, README, benchmarks/ or tests/ speaks of sessions other than POSIX process sessions."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core import matrix
from tests.sources import repo_files

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "measurements"
# a repository path as a finding could print it: a top-level folder of this repository, then a file or folder
PATH = re.compile(r"(?<![\w/.-])((?:docs|tests|benchmarks|scripts|examples|matrix|kernelcheck)/[\w./{}*,+-]*[\w*}/])")
RECORD = re.compile(r"\b(20\d\d-\d\d-\d\d(?:-[a-z0-9]+)+-[0-9a-f]{7})\b")
URL = re.compile(r"https?://[^\s)\"'>,;\\]+")
# modules whose literals are written into the repository's docs, for developers (docs/findings.md), not to users
DOC_WRITERS = ("kernelcheck/core/findings_catalogue.py:",)
OLD_FACTS = "FACTS" + ".md"  # the facts file that lived outside the repository (docs/facts.md replaced it)


def _shipped_matrix_globs() -> list[str]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert data["package-dir"]["kernelcheck._matrix"] == "matrix"
    return list(data["package-data"]["kernelcheck._matrix"])


def shipped(path: str) -> bool:
    """True when the wheel ships the repository file `path` (kernelcheck/ modules, matrix/ package data)."""
    path = path.rstrip("/.")
    if path.startswith("kernelcheck/"):
        return (REPO / path).exists()
    if path.startswith("matrix/"):
        rel = path.removeprefix("matrix/")
        if (REPO / path).is_dir():
            return any((REPO / path).iterdir())
        return (REPO / path).is_file() and any(fnmatch.fnmatch(rel, g) for g in _shipped_matrix_globs())
    return False


def unresolved(text: str) -> list[str]:
    """What in `text` points at something a user of the wheel cannot open."""
    bad = [p for p in PATH.findall(text) if not shipped(p)]
    bad += [r for r in RECORD.findall(text) if not (RECORDS / r / "README.md").is_file()]
    bad += [u for u in URL.findall(text) if not re.fullmatch(r"https?://[\w-]+(\.[\w-]+)*(/\S*)?", u)]
    if OLD_FACTS in text or "FACTS " in text:
        bad.append(OLD_FACTS)
    return bad


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def matrix_strings() -> Iterator[tuple[str, str]]:
    """Every string of the shipped matrix data: a rule's message, fix and reference, a measurement's evidence."""
    for f in repo_files("matrix"):
        if f.suffix == ".toml":
            data = tomllib.loads(f.read_text(encoding="utf-8"))
        elif f.suffix == ".json":
            data = json.loads(f.read_text(encoding="utf-8"))
        else:
            continue
        for s in _strings(data):
            yield f.relative_to(REPO).as_posix(), s


def code_strings() -> Iterator[tuple[str, str]]:
    """The string literals of kernelcheck/ that can reach a user (docstrings left out: nobody is shown those)."""
    for f in sorted((REPO / "kernelcheck").rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        docs = set()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                yield f"{f.relative_to(REPO).as_posix()}:{node.lineno}", node.value


def test_the_checker_tells_what_resolves_from_what_does_not() -> None:
    assert unresolved("matrix/torch.toml (torch -> triton pins); kernelcheck/trace/verdicts.py") == []
    assert unresolved("kernelcheck measurement record 2026-12-03-h200-step-f239ad3") == []
    assert unresolved("https://github.com/fla-org/flash-linear-attention/issues/640; fla-core 0.6.0 fla/utils.py") == []
    assert unresolved("docs/measurements/2026-12-03-h200-step-f239ad3/run2/step.json") == [
        "docs/measurements/2026-12-03-h200-step-f239ad3/run2/step.json"]
    assert unresolved("measured: tests/integration/test_packing.py") == ["tests/integration/test_packing.py"]
    assert unresolved("record 2026-01-01-h200-nothing-0000000") == ["2026-01-01-h200-nothing-0000000"]
    assert unresolved(f"{OLD_FACTS} section 6") == [OLD_FACTS]
    assert unresolved("matrix/nothing.toml") == ["matrix/nothing.toml"]


def test_every_string_of_the_shipped_matrix_points_at_something_a_user_can_open() -> None:
    bad = [(where, b, s[:120]) for where, s in matrix_strings() for b in unresolved(s)]
    assert bad == []


SOURCE = re.compile(r"https?://|\b20\d\d-\d\d-\d\d(-[a-z0-9]+)+-[0-9a-f]{7}\b|"  # a URL, a measurement record,
                    r"\b[A-Za-z][\w.-]* \d+\.\d+[\w.+-]*\b|\bmatrix/|\b[\w.-]+#\d+")  # a release, matrix/, proj#N


def test_every_reference_of_the_shipped_matrix_names_its_source() -> None:
    """A rule's, signature's or measurement's `reference` / `evidence` names where a reader checks it: a URL, a
    measurement record, a released package's file (`package version path`), the shipped matrix, or an upstream
    issue (`project#N`); never "the docs" in general."""
    def refs(value: Any, key: str = "") -> Iterator[str]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield from refs(v, k)
        elif isinstance(value, list):
            for v in value:
                yield from refs(v, key)
        elif isinstance(value, str) and (key.endswith("reference") or key == "evidence"):
            yield value

    found = [(f.name, r) for f in sorted((REPO / "matrix").glob("*.toml"))
             for r in refs(tomllib.loads(f.read_text(encoding="utf-8")))]
    assert len(found) > 50
    assert [(name, r[:100]) for name, r in found if not SOURCE.search(r)] == []


def test_no_literal_in_kernelcheck_points_at_a_repository_file_the_wheel_lacks() -> None:
    """Help texts may name the guides (docs/*.md) and recipes (examples/) of the repository, which exist; nothing
    may name its tests, benchmarks, scripts or measurement files, or a record that is not there."""
    bad = []
    for where, s in code_strings():
        for b in unresolved(s):
            guide = re.fullmatch(r"(docs/[\w-]+\.md|examples/[\w.-]+)\.?", b)
            if where.startswith(DOC_WRITERS):
                continue
            if not (guide and (REPO / guide.group(1)).is_file()):
                bad.append((where, b))
    assert bad == []


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "tests" / "data" / "reports").glob("*.json")))
def test_the_findings_of_every_recorded_report_point_at_what_a_user_can_open(name: str) -> None:
    data = json.loads((REPO / "tests" / "data" / "reports" / f"{name}.json").read_text(encoding="utf-8"))
    findings = [f for key in ("findings", "notes") for f in data.get(key) or [] if isinstance(f, dict)]
    for f in findings:
        for field in ("message", "fix", "reference"):
            assert unresolved(f.get(field) or "") == [], (f["id"], field)


def test_the_fallback_cost_finding_names_its_measurement_record_and_no_path() -> None:
    from kernelcheck.doctor import cost

    here = {"gpu": "NVIDIA H200", "torch": "2.11.0+cu130", "triton": "3.6.0", "transformers": "5.17.0"}
    ms = cost.measurements(Path("/nonexistent"), m=matrix.load())
    assert ms, "matrix/verified.toml has [[measured]] tables"
    for m in ms:
        f = cost.finding(m, [], "qwen3.8-27b")
        assert f.id == "fallback-cost" and unresolved(f.message) == []
        assert PATH.findall(f.message) == []
        assert RECORD.findall(f.message), "the finding names the record the numbers come from"
    _, distance = cost.choose(ms, "qwen3_5", here)
    assert distance == []


def _product_files() -> list[Path]:
    out = [REPO / "README.md"]
    for folder in ("kernelcheck", "matrix", "docs"):
        out += [p for p in repo_files(folder) if p.suffix in (".py", ".toml", ".json", ".md")]
    return out


def test_no_product_file_names_the_facts_file_users_do_not_have() -> None:
    assert (REPO / "docs" / "facts.md").is_file()
    assert [p.relative_to(REPO).as_posix() for p in _product_files()
            if OLD_FACTS in p.read_text(encoding="utf-8", errors="replace")] == []


def test_every_record_a_fact_or_finding_cites_is_in_the_repository_with_its_readme() -> None:
    cited = set(RECORD.findall((REPO / "docs" / "facts.md").read_text(encoding="utf-8")))
    cited |= {r for _, s in matrix_strings() for r in RECORD.findall(s)}
    assert cited and all((RECORDS / r / "README.md").is_file() for r in cited)
    for record in RECORDS.iterdir():  # every record is named <date>-<gpu>-<what>-<commit> and says what it holds
        assert RECORD.fullmatch(record.name) and (record / "README.md").is_file(), record.name


# the word, alone: identifiers (start_new_session, get_session, _signal_session) are not prose
SESSION = re.compile(r"(?<![\w-])sessions?(?![\w-])", re.I)
# POSIX process sessions, which the install code and its tests do speak of
POSIX = re.compile(r"start_new_session|setsid|getsid|getpgid|\b(own|new|whole|pip's) session\b|"
                   r"\bsession (it leads|and group)\b|process of the session")
THIS = Path(__file__).resolve().relative_to(REPO).as_posix()  # its examples are the words it looks for
PROSE = (".md", ".toml", ".py", ".sh", ".txt", ".json", ".yml", ".yaml", ".cfg", ".sbatch")


def _prose_files() -> list[str]:
    out = ["README.md"]
    for root in ("docs", "matrix", "benchmarks", "tests", "kernelcheck"):
        for f in repo_files(root):
            rel = f.relative_to(REPO).as_posix()
            if not f.is_file() or not rel.endswith(PROSE) or rel == THIS:
                continue
            if any(part.startswith(".") or part == "__pycache__" or part.endswith(".egg-info") for part in f.parts):
                continue
            if rel.startswith("docs/measurements/") and not rel.endswith("README.md"):
                continue  # a record's raw files are what the machine printed, kept as they were
            out.append(rel)
    return out


def session_words(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if SESSION.search(line) and not POSIX.search(line)]


def test_the_session_check_catches_prose_and_spares_process_sessions() -> None:
    assert session_words("measured in session 8 (H200)") and session_words("# GPU Sessions 9 and 10")
    assert session_words("the same session's reports")
    assert not session_words("subprocess.Popen(cmd, start_new_session=True)")
    assert not session_words("pip in its own session, its temp folders beside the constraints file")
    assert not session_words("from huggingface_hub import get_session")


def test_no_prose_speaks_of_sessions() -> None:
    files = _prose_files()
    assert "docs/facts.md" in files and "README.md" in files
    bad = {rel: words for rel in files
           if (words := session_words((REPO / rel).read_text(encoding="utf-8", errors="replace")))}
    assert bad == {}


def test_the_image_build_docs_state_what_their_record_measured() -> None:
    """docs/pipelines.md's whole-image build is a result, not a pending correction: the record it cites exists, every
    build step and the gate exited 0 there, and the seconds the docs quote are the record's."""
    text = (REPO / "docs" / "pipelines.md").read_text(encoding="utf-8")
    assert "not reproduced" not in text and "not been rerun" not in text
    (record,) = set(re.findall(r"docs/measurements/([\w.-]+-image-build-[0-9a-f]{7})/", text))
    summary = json.loads((REPO / "docs" / "measurements" / record / "summary.json").read_text(encoding="utf-8"))
    assert [s["exit"] for s in summary["steps"]] == [0, 0, 0]
    assert summary["gate"]["verdict"] == "ready" and set(summary["gate"]["functions"].values()) == {"fast"}
    install = next(s for s in summary["steps"] if "kernelcheck install" in s["command"])
    assert f"exited 0 in {install['seconds']:.0f} s" in " ".join(text.split())
