"""`progress.doing`: a long step's lines say how far it is (verify --packing: which segment runs), and
KERNELCHECK_PROGRESS_EVERY sets how often a log gets a line (30 s unless set; also over a step's own interval)."""

from __future__ import annotations

import io
import time

import pytest

from kernelcheck.core.errors import BadInput
from kernelcheck.report import progress


@pytest.fixture(autouse=True)
def _on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELCHECK_PROGRESS", "1")
    progress.set_quiet(False)


def test_the_log_line_says_what_the_step_is_doing_and_the_interval_comes_from_the_setting(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KERNELCHECK_PROGRESS_EVERY", "0.1")
    log = io.StringIO()
    with progress.working("kernelcheck verify --packing", stream=log, delay=5, every=30):  # the setting wins
        for i in range(1, 4):
            progress.doing(f"segment {i} of 3 run alone (fwd+bwd)")
            time.sleep(0.35)
    lines = log.getvalue().splitlines()
    assert len(lines) >= 3, lines
    assert all(ln.startswith("kernelcheck verify --packing (still working, ") for ln in lines)  # wording: here
    assert lines[-1].endswith("; segment 3 of 3 run alone (fwd+bwd))")
    said = [int(ln.split("segment ")[1].split()[0]) for ln in lines if "segment " in ln]
    assert said == sorted(said) and said[-1] == 3
    log = io.StringIO()  # the next step starts with nothing said: the text of the last one is not shown
    with progress.working("kernelcheck next", stream=log, delay=5):
        time.sleep(0.25)
    assert log.getvalue().splitlines()[0] == "kernelcheck next (still working, 0 s)"


def test_unset_the_step_keeps_its_interval_and_a_bad_value_is_bad_input(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("KERNELCHECK_PROGRESS_EVERY", raising=False)
    assert progress.Ticker("x", every=15.0).every == 15.0 and progress.Ticker("x").every == progress.PLAIN_EVERY_S
    monkeypatch.setenv("KERNELCHECK_PROGRESS_EVERY", "0")
    with pytest.raises(BadInput, match="KERNELCHECK_PROGRESS_EVERY"):
        progress.Ticker("x")


def test_with_the_setting_an_announced_step_says_its_first_line_after_that_interval(monkeypatch: pytest.MonkeyPatch):
    """A step that announces itself waits `delay` (2 s) for its first line; lines asked for every 0.1 s come sooner,
    so a short first phase (a mode of verify --packing that runs 1 s) is still said."""
    monkeypatch.setenv("KERNELCHECK_PROGRESS_EVERY", "0.1")
    log = io.StringIO()
    with progress.working("kernelcheck verify --packing", stream=log, delay=5, announce=True):
        progress.doing("mode 1 of 3 (position_ids), 60+70 tokens")
        time.sleep(0.5)
    lines = log.getvalue().splitlines()
    assert lines and lines[0] == "kernelcheck verify --packing ...", lines
    assert any(ln.endswith("; mode 1 of 3 (position_ids), 60+70 tokens)") for ln in lines[1:]), lines
