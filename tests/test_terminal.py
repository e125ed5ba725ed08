"""Text at an 80-column terminal: wrapped, coloured only on a TTY (NO_COLOR respected), --quiet = verdict only."""

from __future__ import annotations

import io

import pytest

from kernelcheck.report.model import FunctionStatus, Report, render_text
from kernelcheck.report.terminal import Terminal, present, wrap_line

WHY = ("flash-linear-attention is not installed (pip distribution fla-core); and torch 2.13.0+cpu is a CPU build and "
       "no CUDA GPU is usable here")


def report() -> Report:
    fix = "kernelcheck install --model qwen3.8-27b"
    return Report("doctor", {}, None, "train", [
        FunctionStatus("chunk_gated_delta_rule", "fla-core", "fallback", "torch_chunk_gated_delta_rule", WHY, fix),
        FunctionStatus("fused_recurrent_gated_delta_rule", "fla-core", "fallback", "torch_recurrent", WHY, fix),
    ])


def test_identical_why_and_fix_are_said_once() -> None:
    text = render_text(report())
    assert text.count(WHY) == 1
    assert "why, fix: as for chunk_gated_delta_rule" in text


def test_wrapped_lines_fit_80_columns_and_keep_every_word() -> None:
    text = render_text(report())
    out = present(text, Terminal(width=80))
    assert all(len(ln) <= 80 for ln in out.splitlines())
    assert out.split() == text.split()
    # a continuation of a why line is indented under the text, not under the label
    lines = out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("why: "))
    assert lines[i + 1].startswith(" " * (lines[i].index("why: ") + 5))


def test_a_short_line_is_left_alone() -> None:
    assert wrap_line("verdict: READY (exit 0)", 80) == ["verdict: READY (exit 0)"]


def test_quiet_prints_the_verdict_line_only() -> None:
    out = present(render_text(report()), Terminal(quiet=True))
    assert out == "verdict: FALLBACK: a slow torch path would run (exit 3)"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_tty_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert Terminal.detect(FakeTTY()).colour and Terminal.detect(FakeTTY()).width
    assert not Terminal.detect(io.StringIO()).colour and Terminal.detect(io.StringIO()).width is None
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Terminal.detect(FakeTTY()).colour
    painted = present(render_text(report()), Terminal(colour=True))
    assert "\033[1;33mFALLBACK\033[0m" in painted.splitlines()[-1]
    assert "\033[" not in present(render_text(report()), Terminal())


# --- a real process on a real 80-column pseudo-terminal --------------------------------------------------------

def _on_a_tty(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """`python -m kernelcheck ARGS` with its stdout on a pty of 80 columns, as a person at a terminal sees it."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 80, 0, 0))
    e = dict(os.environ, PYTHONPATH=str(repo), HF_HUB_OFFLINE="1", TERM="xterm", **(env or {}))
    e.pop("COLUMNS", None)
    if env is None:
        e.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", *args], stdout=slave, stderr=subprocess.DEVNULL,
                            env=e, cwd=repo)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


@pytest.mark.integration
def test_doctor_at_an_80_column_terminal() -> None:
    import re

    code, out = _on_a_tty(["doctor", "--model", "qwen3.8-27b"])
    plain = re.sub(r"\033\[[0-9;]*m", "", out)
    assert code == 3 and "\033[" in out, out[-2000:]  # colour on a TTY
    assert max(map(len, plain.splitlines())) <= 80, max(plain.splitlines(), key=len)  # was 245 columns
    assert sum(ln.startswith("hub") for ln in plain.splitlines()) == 1  # Hub kernels not used: one line, not 10
    assert plain.count("why: flash-linear-attention is not installed") == 1  # said once, not once per function
    code, out = _on_a_tty(["doctor", "--model", "qwen3.8-27b"], env={"NO_COLOR": "1"})
    assert code == 3 and "\033[" not in out
    code, out = _on_a_tty(["doctor", "--model", "qwen3.8-27b", "--quiet"], env={"NO_COLOR": "1"})
    assert code == 3 and out.strip() == "verdict: FALLBACK: a slow torch path would run (exit 3)"
