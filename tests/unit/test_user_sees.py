"""What a user sees: global flags before the command, and the small wording points of the reports."""

from __future__ import annotations

import os

from click.testing import CliRunner

from kernelcheck.cli.main import main


def test_no_progress_is_accepted_before_the_command_and_shown_in_help() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ["--help"], terminal_width=100)
    assert top.exit_code == 0 and "--no-progress" in top.output
    result = runner.invoke(main, ["--no-progress", "models", "--help"])
    assert result.exit_code == 0, result.output
    assert os.environ.get("KERNELCHECK_PROGRESS") == "0"


def test_source_scanning_tests_read_gits_list_not_the_checkouts_folders() -> None:
    """A checkout made by the README's set-up holds .venv (12,000+ files): a test that walks the repository root
    read them all. The tests that scan the repository take git's list (tests/sources.py repo_files)."""
    import re
    from pathlib import Path

    from tests.sources import REPO, repo_files

    walks = re.compile(r"\b(ROOT|REPO)(\s*/\s*[\w\"' ]+\))?\.rglob\(\"\*\"\)|\(REPO / (root|folder)\)\.rglob")
    found = [p.name for p in sorted((REPO / "tests" / "unit").glob("*.py"))
             if p.name != Path(__file__).name and walks.search(p.read_text())]
    assert found == []
    listed = repo_files()
    assert REPO / "README.md" in listed and REPO / "kernelcheck" / "__init__.py" in listed
    assert not [p for p in listed if any(part.startswith(".venv") or part == ".git" for part in p.parts)]


def test_a_fast_lane_property_draws_at_most_the_fast_profiles_examples() -> None:
    """The fast lane's properties draw FAST_EXAMPLES examples each (`--hypothesis-profile thorough`: their own
    counts); 300 a property made the lane cost a minute of CPU on the 2-core machine."""
    from types import SimpleNamespace

    from hypothesis import given, settings, strategies

    from tests import conftest

    drawn: list[int] = []

    @settings(max_examples=300, deadline=None, database=None)
    @given(strategies.integers())
    def prop(x: int) -> None:
        drawn.append(x)

    conftest._fewer_examples(SimpleNamespace(obj=prop))  # type: ignore[arg-type]
    prop()
    assert 0 < len(drawn) <= conftest.FAST_EXAMPLES == 25
