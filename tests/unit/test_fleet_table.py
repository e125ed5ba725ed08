"""The fleet's words, tested once, here at their renderers: table.py's table, differences and MISSING lines
(from each missing kind), and gather.py's messages for ranks that never joined or died. Everywhere else the
tests read the fleet JSON's ids and fields (missing[].kind, groups, differences)."""

from __future__ import annotations

import json
from pathlib import Path

from kernelcheck.core.status import EXIT_BROKEN, EXIT_FALLBACK
from kernelcheck.fleet import gather, summary, table
from kernelcheck.fleet.gather import DIED, NEVER_JOINED, NO_REPORT, UNREADABLE, Missing
from kernelcheck.fleet.record import RankRecord

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"


def _records(*names: str) -> list[RankRecord]:
    data = json.loads((REPORTS / "doctor_train.json").read_text())
    other = json.loads((REPORTS / "doctor_infer.json").read_text())
    return [summary.summarise(other if n.startswith("odd") else data, label=n) for n in names]


def test_each_missing_kind_in_words() -> None:
    missing = {1: Missing(NEVER_JOINED), 2: Missing(DIED), 3: Missing(UNREADABLE),
               4: Missing(NO_REPORT, expected=6, found=4)}
    text = table.render_text("doctor", _records("node0"), missing, EXIT_BROKEN)
    assert "MISSING rank 1: never joined" in text  # wording: renderer test
    assert "MISSING rank 2: died during the gather" in text  # wording: renderer test
    assert "MISSING rank 3: sent a record this kernelcheck cannot read" in text  # wording: renderer test
    assert "MISSING rank 4: no report (expected 6, found 4)" in text  # wording: renderer test
    assert text.splitlines()[-1] == ("verdict: BROKEN: a rank would crash, refuse or compute wrong results, or a "
                                     "rank is missing (exit 4)")
    reasons = [m["reason"] for m in table.to_json("doctor", [], missing, EXIT_BROKEN)["missing"]]
    assert reasons == [table.missing_reason(m) for _, m in sorted(missing.items())]


def test_the_odd_group_and_the_agreeing_ones_by_name() -> None:
    recs = _records("node1", "odd2", "node3")
    text = table.render_text("compare", recs, {}, EXIT_FALLBACK)
    assert text.splitlines()[0] == "kernelcheck compare · 3 reports"
    assert "ODD odd2:" in text and "2 agree: node1, node3" in text  # wording: renderer test
    alike = table.render_text("compare", _records("node1", "node3"), {}, EXIT_FALLBACK)
    assert "none: all 2 agree" in alike  # wording: renderer test


def test_the_gate_messages_for_ranks_that_never_joined_or_died() -> None:
    said = gather.never_joined_message([2], 3, 4.0)
    assert said.startswith("rank 2 of 3 never joined within 4 s")  # wording: renderer test
    assert gather.died_message([2]).startswith("rank 2 joined but died or hung during the gather")
    assert "rank 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19 and 5 more" in \
        gather.died_message(list(range(25)))  # wording: renderer test


def test_a_bad_report_file_is_one_line_that_names_the_command_once(tmp_path: Path) -> None:
    """compare's messages are printed after "kernelcheck compare: ": they must not say "compare:" again."""
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    bad = tmp_path / "node.json"
    bad.write_text("not json\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in ([str(bad)], [str(empty)], [str(tmp_path / "missing.json")]):
        res = CliRunner().invoke(main, ["compare", *args])
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith("kernelcheck compare: ") and "compare: compare" not in res.stderr, res.stderr
        assert res.stderr.count("kernelcheck compare:") == 1


def test_the_table_fits_100_columns_says_common_values_once_and_counts_in_words(tmp_path: Path) -> None:
    """Piped, compare's table wrapped mid-row; --all-ranks' ran to 139 columns; "1 ranks"."""
    from dataclasses import replace

    from kernelcheck.fleet.gather import Missing

    long = {"fla-core": "fla-core 0.6.0+a-very-long-local-version-label-from-a-build",
            "causal-conv1d": "causal-conv1d 1.7.0+cu13torch2.11cxx11abitrue"}
    recs = [replace(r, environment=replace(r.environment, packages=long))
            for r in _records("node1-with-a-long-report-file-name.json", "odd2.json", "node3.json")]
    text = table.render_text("doctor", recs, {4: Missing(NO_REPORT, expected=6, found=4)}, EXIT_BROKEN)
    from kernelcheck.report.terminal import Terminal, present

    lines = text.splitlines()
    piped = present(text, Terminal(width=100)).splitlines()  # what a pipe or CI log shows
    assert max(map(len, piped)) <= 100, text
    for name in ("node1-with-a-long-report-file-name.json", "odd2.json", "node3.json"):  # rows never wrapped
        assert [line for line in piped if line.startswith(f"  {name} ") and line.endswith("FALLBACK")], piped
    (common,) = [line for line in lines if line.startswith("  all: ")]
    assert "torch 2.13.0+cpu" in common and "transformers 5.24.0" in common  # said once, not per row
    assert "MISSING rank 4: no report (expected 6, found 4)" in text  # wording: renderer test
    assert lines[0] == "kernelcheck doctor --all-ranks · 4 ranks"
    assert table.render_text("doctor", _records("n"), {}, EXIT_FALLBACK).splitlines()[0] == \
        "kernelcheck doctor --all-ranks · 1 rank"


def test_compare_says_a_json_that_is_no_report_is_no_report_and_writes_o(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    other = tmp_path / "package.json"
    other.write_text(json.dumps({"name": "x", "version": "1.0"}))
    res = CliRunner().invoke(main, ["compare", str(other)])
    assert res.exit_code == 2 and "not a kernelcheck report" in res.output and "version" not in res.output.lower()
    out = tmp_path / "fleet.json"
    res = CliRunner().invoke(main, ["compare", str(REPORTS / "doctor_train.json"), "-o", str(out)])
    assert res.exit_code == 3 and json.loads(out.read_text())["schema"] == "kernelcheck.fleet/1"
