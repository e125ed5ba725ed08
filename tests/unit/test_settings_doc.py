"""Settings a user can find: every KERNELCHECK_* variable in docs/settings.md, --version/-V with the commit and the
matrix date, --color, -o FILE, and shell completion, through click's runner (in-process)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck import __version__
from kernelcheck.cli.main import main
from kernelcheck.core import settings, version

ROOT = Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "tests" / "data" / "step" / "cpu_tiny_step.json.gz")
FALLBACK_TRACE = str(ROOT / "tests" / "data" / "gpu" / "gdn_fallback.json.gz")  # verdict FALLBACK: coloured


def test_every_variable_kernelcheck_reads_is_in_docs_settings_md_and_in_settings_py():
    used = {m for p in (ROOT / "kernelcheck").rglob("*.py")
            for m in re.findall(r"(?<![_A-Z])KERNELCHECK_[A-Z][A-Z_]*[A-Z]", p.read_text(encoding="utf-8"))}
    assert {"KERNELCHECK_OFFLINE", "KERNELCHECK_PROGRESS", "KERNELCHECK_FLEET_ID"} <= used
    doc = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert sorted(v for v in used if f"`{v}`" not in doc) == []
    assert sorted(v for v in used if v not in (settings.__doc__ or "")) == []


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_the_commit_of_this_checkout_and_the_matrix_date(flag):
    res = CliRunner().invoke(main, [flag])
    assert res.exit_code == 0
    commit = version.git_commit(ROOT)
    assert commit and re.fullmatch(r"[0-9a-f]{12}", commit)
    assert res.output.strip() == f"kernelcheck {__version__}, commit {commit} (checkout), matrix data of " \
        f"{version.data_updated()}"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", version.data_updated() or "")


def test_commit_is_read_from_a_worktree_and_from_packed_refs(tmp_path):
    common = tmp_path / "main.git"
    (common / "worktrees" / "wt").mkdir(parents=True)
    (common / "packed-refs").write_text("# pack-refs\n" + "a" * 40 + " refs/heads/wt\n")
    wt_git = common / "worktrees" / "wt"
    (wt_git / "HEAD").write_text("ref: refs/heads/wt\n")
    (wt_git / "commondir").write_text("../..\n")
    checkout = tmp_path / "wt"
    checkout.mkdir()
    (checkout / ".git").write_text(f"gitdir: {wt_git}\n")
    assert version.git_commit(checkout) == "a" * 12
    (common / "refs" / "heads").mkdir(parents=True)
    (common / "refs" / "heads" / "wt").write_text("b" * 40 + "\n")  # a loose ref wins over packed-refs
    assert version.git_commit(checkout) == "b" * 12
    assert version.git_commit(tmp_path / "nowhere") is None


def test_color_always_beats_no_color_and_never_and_auto_when_piped_print_none():
    env = {"NO_COLOR": "1"}
    always = CliRunner().invoke(main, ["--color", "always", "trace", FALLBACK_TRACE], env=env)
    never = CliRunner().invoke(main, ["--color", "never", "trace", FALLBACK_TRACE])
    auto = CliRunner().invoke(main, ["trace", FALLBACK_TRACE])  # the runner's stdout is not a TTY
    assert always.exit_code == never.exit_code == auto.exit_code
    assert "\x1b[" in always.stdout and "\x1b[" not in never.stdout \
        and "\x1b[" not in auto.stdout  # wording: renderer test
    assert CliRunner().invoke(main, ["--color", "sometimes", "models"]).exit_code == 2


def test_output_file_gets_the_json_while_the_terminal_gets_the_text(tmp_path):
    out = tmp_path / "reports" / "trace.json"
    res = CliRunner().invoke(main, ["trace", TRACE, "-o", str(out)])
    rep = json.loads(out.read_text())
    assert rep["command"] == "trace" and rep["exit_code"] == res.exit_code
    assert res.stdout.strip() and not res.stdout.lstrip().startswith("{")
    with pytest.raises(json.JSONDecodeError):  # the terminal gets the text, not the JSON
        json.loads(res.stdout)
    assert json.loads(CliRunner().invoke(main, ["trace", TRACE, "--json"]).stdout) == rep  # what --json prints


def test_output_file_of_a_failed_run_holds_the_error_and_bad_names_are_exit_2(tmp_path):
    out = tmp_path / "t.json"
    out.write_text('{"stale": true}')
    res = CliRunner().invoke(main, ["trace", str(tmp_path / "missing.json"), "--output", str(out)])
    assert res.exit_code == 2
    err = json.loads(out.read_text())
    assert err["exit_code"] == 2 and err["verdict"] is None and err["error"]
    res = CliRunner().invoke(main, ["trace", TRACE, "-o", str(tmp_path / "t.xml")])
    assert res.exit_code == 2 and "JSON only" in res.stderr  # wording: renderer test (exit-2 message)
    res = CliRunner().invoke(main, ["trace", TRACE, "-o", str(tmp_path)])
    assert res.exit_code == 2 \
        and "is a directory" in res.stderr  # wording: click's own message; click's own check of the path


def test_shell_completion_script_comes_from_clicks_variable():
    res = CliRunner().invoke(main, [], prog_name="kernelcheck", env={"_KERNELCHECK_COMPLETE": "zsh_source"})
    assert "_kernelcheck_completion" in res.output \
        and "compdef _kernelcheck_completion kernelcheck" in res.output  # wording: the help text
    assert "_KERNELCHECK_COMPLETE=bash_source kernelcheck" in (ROOT / "docs" / "settings.md").read_text()
    help_text = CliRunner().invoke(main, ["--help"]).output
    assert "_KERNELCHECK_COMPLETE=bash_source kernelcheck" in help_text  # wording: the help text
