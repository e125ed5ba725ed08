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
