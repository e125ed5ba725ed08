"""What a user sees: global flags before the command, and the small wording points of the reports."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
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


def test_the_thorough_profile_is_chosen_by_the_option_or_the_environment() -> None:
    """Every property at its own count: `--hypothesis-profile thorough` or KERNELCHECK_TEST_THOROUGH=1
    (CONTRIBUTING.md); anything else keeps the fast lane's FAST_EXAMPLES."""
    from tests.conftest import thorough

    assert thorough("thorough", {}) and thorough(None, {"KERNELCHECK_TEST_THOROUGH": "1"})
    assert not thorough(None, {}) and not thorough("ci", {"KERNELCHECK_TEST_THOROUGH": "0"})


def test_an_unreachable_hub_and_an_empty_cache_are_one_sentence_per_repository(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The docker-build gate offline: the Hub fails (DNS) and the cache holds nothing. The repository's error is one
    sentence naming both; no "the cache answered instead" (it did not); each row points at it instead of repeating
    it; the repository is never "from none"; the prefetch finding does not repeat the plan's reason."""
    from kernelcheck.core.plan_step import Step, StepKind
    from kernelcheck.hub import prefetch
    from kernelcheck.integrations import kernels_hub
    from kernelcheck.report import hub_text
    from kernelcheck.report.hub import HubRow, ResolutionLines, RowLine

    for var in ("KERNELCHECK_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LOCAL_KERNELS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))

    def dns(*_args: object) -> kernels_hub.Resolution:
        raise ConnectionError("[Errno -2] Name or service not known")

    monkeypatch.setattr(kernels_hub, "_resolve_hub", dns)
    res = kernels_hub.resolve_repo("kernels-community/fla", version=3, source="auto")
    assert (res.source, res.chosen, res.notes, res.hub_unreachable) == ("none", None, (), None)
    assert res.error is not None and "answered instead" not in res.error
    assert res.error.count("ConnectionError") == 1 and "not in the cache" in res.error
    row = HubRow("chunk_gated_delta_rule", "function", True, repo=res.spec, layer="chunk_gated_delta_rule",
                 source=res.source, error=res.error, path="load-fails")
    text = hub_text.lines([RowLine(row, True), RowLine(row, True), ResolutionLines(res.spec, res)])
    assert sum(line.count("ConnectionError") for line in text) == 1
    assert not [line for line in text if "from none" in line]
    assert text[-2] == "kernels-community/fla@v3: no build listed:"
    step = Step("kernels-community/fla", "skipped", "hub", res.spec, f"not planned: {res.error}",
                "kernelcheck hub --prefetch", kind=StepKind.HUB)
    (found,) = prefetch.findings([step])
    assert found.id == "hub-prefetch-skipped" and "ConnectionError" not in found.message


def test_a_real_installs_plan_is_fitted_when_piped_and_quiet_drops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real install prints its plan before anything runs (Dockerfile.build runs it: the lines land in build logs):
    fitted to 100 columns like the report, and nothing of it with -q."""
    from kernelcheck.commands import install as command
    from kernelcheck.core.errors import BadInput

    monkeypatch.delenv("COLUMNS", raising=False)
    plan = "plan\n  1. install  fla-core  fla-core==0.6.0  [pypi]\n     why: " + "the newest wheel fits; " * 20

    def run(_req: object, ctx: object) -> object:
        ctx.sink(plan)  # type: ignore[attr-defined]
        raise BadInput("stop here.")

    monkeypatch.setattr(command, "run", run)
    loud = CliRunner().invoke(main, ["install", "--model", "qwen3.8-27b", "--wheelhouse", "/nonexistent/wh"])
    printed = loud.stdout.splitlines()
    assert "plan" in printed and max(len(line) for line in printed) <= 100, loud.output
    assert " ".join(printed).count("fits;") == 20  # every word kept
    quiet = CliRunner().invoke(main, ["install", "--model", "qwen3.8-27b", "-q", "--wheelhouse", "/nonexistent/wh"])
    assert quiet.exit_code == 2 and "the newest wheel fits" not in quiet.stdout


def test_install_run_lines_paste_as_printed() -> None:
    import shlex

    from kernelcheck.install.plan_types import Options, pip_cmd

    line = pip_cmd("/wh/fla_core-0.6.0-py3-none-any.whl", Options(target="/site"))
    assert shlex.split(line) == ["pip", "install", "--no-deps", "--target", "/site", "--upgrade",
                                 "/wh/fla_core-0.6.0-py3-none-any.whl"]


def test_verify_packing_text_wraps_once_clips_errors_at_a_word_and_shows_progress(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """verify --packing piped: the error a mode raised ended mid-word ("... can't keep packed sequences apart w"),
    the headline was two fixed lines the terminal wrapped again, a call in a fix was split inside its parentheses,
    and 17-34 s passed with no progress line."""
    from contextlib import contextmanager

    from kernelcheck.core import matrix
    from kernelcheck.report import progress
    from kernelcheck.report.terminal import wrap_line
    from kernelcheck.verify import packing, packing_report

    err = ("ValueError: `chunk_gated_delta_rule` can't keep packed sequences apart without cu_seqlens: pass "
           "them, or pad the batch")
    row = packing.LengthResult("short", (12, 10), "raises", error=err)
    mode = packing.PackingResult("flash", "raises", [row], "DataCollatorWithFlattening()")
    text = packing.render_text([mode], "cpu")
    (said,) = [line for line in text.splitlines() if "raises ValueError" in line]
    assert said.endswith(" ...") and said.split()[-2] in err.split() and len(said) <= 100
    assert text.splitlines()[0].endswith("max |diff|")  # the headline: one logical line
    call = "DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)"
    assert any(call in line for line in wrap_line(f"  fix: pad instead, or use {call}, forward without a cache",
                                                   100))
    labels: list[str] = []

    @contextmanager
    def working(label: str, **_kw: object):  # type: ignore[no-untyped-def]
        labels.append(label)
        yield

    monkeypatch.setattr(progress, "working", working)
    monkeypatch.setattr(packing, "measure_all", lambda device, m: [mode])
    monkeypatch.setattr(packing, "cached_forward", lambda device, m: 0.5)
    monkeypatch.setattr(packing_report, "doctor_outcomes", lambda *a, **k: {})
    packing_report.measure("qwen3.8-27b", m=matrix.load())
    assert labels and all(label.startswith("verify --packing:") for label in labels)


def test_every_guide_has_a_title() -> None:
    from tests.sources import REPO

    assert [p.name for p in sorted((REPO / "docs").glob("*.md")) if not p.read_text().startswith("# ")] == []


def test_a_headline_breaks_between_its_parts_only() -> None:
    """The trace headline put "(sm_90)" on a line of its own."""
    from kernelcheck.report.terminal import wrap_line

    head = ("kernelcheck trace · tests/data/gpu/gdn_fallback.json.gz · 0.2 MB gzip · 13,718 events · NVIDIA H200 "
            "(sm_90)")
    for width in (100, 80):
        lines = wrap_line(head, width)
        assert max(map(len, lines)) <= width and any(line.endswith("NVIDIA H200 (sm_90)") for line in lines)
        assert all(line.endswith(" ·") for line in lines[:-1])


def test_repeated_info_ids_are_counted_not_repeated() -> None:
    """verify --compile's notes read "compile-ok, compile-ok"."""
    from kernelcheck.core.status import Finding, Severity
    from kernelcheck.report.text import render_findings

    infos = [Finding("compile-ok", Severity.INFO, "train pass"), Finding("compile-ok", Severity.INFO, "infer"),
             Finding("gpu-target", Severity.INFO, "x")]
    (line,) = [x for x in render_findings(infos, verbose=False) if "notes:" in x]
    assert "3 notes: compile-ok (2), gpu-target " in line


def test_dir_of_the_package_is_its_api() -> None:
    import kernelcheck

    assert {"os", "Any", "TYPE_CHECKING"} & set(dir(kernelcheck)) == set()
    assert set(kernelcheck.__all__) <= set(dir(kernelcheck))


def test_help_says_a_default_once_and_never_breaks_a_name_at_its_hyphen() -> None:
    import re

    runner = CliRunner()
    for command in ("doctor", "install", "verify", "hub", "trace", "padding"):
        page = runner.invoke(main, [command, "--help"], terminal_width=80).output
        assert "Default: train." not in page, command
        assert [line for line in page.splitlines() if re.search(r"[a-z0-9]-$", line)] == [], command


def test_models_quiet_prints_a_sentence_that_says_something() -> None:
    quiet = CliRunner().invoke(main, ["models", "-q"])
    assert quiet.exit_code == 0 and re.match(r"\d+ aliases, \d+ model types; ", " ".join(quiet.output.split()))


def test_the_long_benchmarks_say_what_they_are_doing_as_they_go() -> None:
    """The benchmark scripts printed nothing for minutes: each run's figures now go to stderr as it ends."""
    from tests.sources import REPO

    for name in ("trace_throughput.py", "doctor_speed.py", "padding_throughput.py"):
        assert "file=sys.stderr, flush=True" in (REPO / "benchmarks" / name).read_text(), name
