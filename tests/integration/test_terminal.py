"""The integration half of tests/unit/test_terminal.py: processes, pip or builds (the in-process tests
are there).

Text at an 80-column terminal: wrapped, coloured only on a TTY (NO_COLOR respected), --quiet = verdict only."""

from __future__ import annotations

import re

import pytest

from tests.unit.test_terminal import (  # helpers and fixtures of the in-process half
    _on_a_tty,
)


def _in_full(output: str) -> set[str]:
    """The ids of the findings a text report shows in full (`[id]` heads their lines)."""
    return set(re.findall(r"\[([a-z0-9][a-z0-9:_.-]*)\]", output))


@pytest.mark.integration  # doctor's import proofs fork children
def test_doctor_verbose_shows_every_info_finding_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    monkeypatch.delenv("COLUMNS", raising=False)  # as piped without $COLUMNS: 100 columns
    quiet = CliRunner().invoke(main, ["doctor", "--model", "qwen3.8-27b", "--no-hub"])
    loud = CliRunner().invoke(main, ["doctor", "--model", "qwen3.8-27b", "--no-hub", "--verbose"])
    assert quiet.exit_code == loud.exit_code == 3
    # the findings shown in full, by id (grouping and words: test_info_findings_are_one_line_unless_verbose_...)
    assert "torch-cpu-build" not in _in_full(quiet.output)
    assert {"torch-cpu-build", "packing"} <= _in_full(loud.output)
    assert max(map(len, quiet.output.splitlines())) <= 100
    assert quiet.output.strip().splitlines()[-1].startswith("verdict: FALLBACK")


@pytest.mark.integration
def test_doctor_at_an_80_column_terminal() -> None:
    import re

    code, out = _on_a_tty(["doctor", "--model", "qwen3.8-27b"])
    plain = re.sub(r"\033\[[0-9;]*m", "", out)
    assert code == 3 and "\033[" in out, out[-2000:]  # wording: renderer test; colour on a TTY
    assert max(map(len, plain.splitlines())) <= 80, max(plain.splitlines(), key=len)  # was 245 columns
    assert sum(ln.startswith("hub") for ln in plain.splitlines()) == 1  # Hub kernels not used: one line, not 10
    assert plain.count("why: flash-linear-attention is not installed") == 1  # said once, not once per function
    code, out = _on_a_tty(["doctor", "--model", "qwen3.8-27b"], env={"NO_COLOR": "1"})
    assert code == 3 and "\033[" not in out  # wording: renderer test
    code, out = _on_a_tty(["doctor", "--model", "qwen3.8-27b", "--quiet"], env={"NO_COLOR": "1"})
    assert code == 3 and out.strip() == "verdict: FALLBACK: a slow torch path would run (exit 3)"
