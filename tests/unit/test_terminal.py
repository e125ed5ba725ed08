"""Text at an 80-column terminal: wrapped, coloured only on a TTY (NO_COLOR respected), --quiet = verdict only."""

from __future__ import annotations

import io

import pytest

from kernelcheck.core.status import Finding, FunctionStatus
from kernelcheck.report.model import Report
from kernelcheck.report.terminal import Terminal, present, wrap_line
from kernelcheck.report.text import render_text

WHY = ("flash-linear-attention is not installed (pip distribution fla-core); and torch 2.13.0+cpu is a CPU build and "
       "no CUDA GPU is usable here")


def report() -> Report:
    fix = "kernelcheck install --model qwen3.8-27b"
    return Report("doctor", None, None, "train", [
        FunctionStatus("chunk_gated_delta_rule", "fla-core", "fallback", "torch_chunk_gated_delta_rule", WHY, fix),
        FunctionStatus("fused_recurrent_gated_delta_rule", "fla-core", "fallback", "torch_recurrent", WHY, fix),
    ])


def test_identical_why_and_fix_are_said_once() -> None:
    text = render_text(report())
    assert text.count(WHY) == 1
    assert "why, fix: as for chunk_gated_delta_rule" in text  # wording: renderer test


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
    monkeypatch.delenv("COLUMNS", raising=False)
    assert not Terminal.detect(io.StringIO()).colour and Terminal.detect(io.StringIO()).width == 100  # piped
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Terminal.detect(FakeTTY()).colour
    painted = present(render_text(report()), Terminal(colour=True))
    assert "\033[1;33mFALLBACK\033[0m" in painted.splitlines()[-1]
    assert "\033[" not in present(render_text(report()), Terminal())


def test_piped_text_fits_100_columns_and_never_splits_a_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    cmd = "pip install 'kernels>=0.18.2,<0.19.0' --constraint /tmp/constraints.txt"
    rep = report()
    rep.findings.append(Finding("kernels-window", "warning", "x " * 80, cmd + "  (only needed for Hub kernels)"))
    rep.findings.append(Finding("long-fix", "warning", "y", "see `kernelcheck doctor --model qwen3.8-27b --packing "
                                "flash --mode train --json --verbose` " + "z " * 30))
    out = present(render_text(rep), Terminal.detect(io.StringIO()))
    lines = out.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    # the command whole on one line, its note after
    assert any(f"fix: {cmd}" in ln for ln in lines)  # wording: renderer test
    assert any("`kernelcheck doctor --model qwen3.8-27b --packing flash --mode train" in ln  # wording: renderer test
               for ln in lines)
    assert out.split() == render_text(rep).split()  # every word kept


def test_a_command_longer_than_the_width_stays_whole_on_its_own_line() -> None:
    cmd = "kernelcheck install --model qwen3.8-27b --arch 9.0 --wheelhouse /very/long/wheelhouse/path/for/docker"
    lines = wrap_line(f"         fix: {cmd}  (then rerun)", 60)
    assert lines[0].strip() == "fix:" and lines[1].strip() == cmd  # wording: renderer test
    assert "then rerun" in lines[-1]  # wording: renderer test


def test_a_command_too_long_for_its_label_moves_left_whole() -> None:
    cmd = "`kernelcheck verify --model qwen3.8-27b --step --mode train --tokens 8192`"
    line = "  WARN   [fallback-cost]  Expected cost of this fallback. Measured by " + cmd + " on an H200."
    lines = wrap_line(line, 80)
    assert max(map(len, lines)) <= 80 and "    " + cmd in lines
    assert " ".join(line.split()) == " ".join(" ".join(lines).split())


def infos() -> Report:
    rep = report()
    rep.findings += [Finding("torch-cpu-build", "info", "cpu"), Finding("bound-at-import", "info", "bound"),
                     Finding("fla-640", "broken", "crash", "pip install tilelang"), Finding("packing", "info", "p")]
    return rep


def test_info_findings_are_one_line_unless_verbose_and_the_verdict_stays_last() -> None:
    lines = render_text(infos(), verbose=False).splitlines()
    assert lines[-1].startswith("verdict: BROKEN")
    assert any("[fla-640]" in ln for ln in lines)  # wording: renderer test; worse than info: in full
    assert not any("[torch-cpu-build]" in ln or "[packing]" in ln for ln in lines)  # wording: renderer test
    grouped = [ln for ln in lines if "torch-cpu-build" in ln]
    assert len(grouped) == 1 and "bound-at-import" in grouped[0] and "packing" in grouped[0] and "3" in grouped[0]
    full = render_text(infos(), verbose=True).splitlines()
    assert all(any(f"[{i}]" in ln for ln in full)  # wording: renderer test
               for i in ("torch-cpu-build", "bound-at-import", "packing"))
    one = report()
    one.findings.append(Finding("torch-cpu-build", "info", "cpu"))
    # a single info finding is not grouped
    assert "[torch-cpu-build]" in render_text(one, verbose=False)  # wording: renderer test


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

    repo = Path(__file__).resolve().parents[2]
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
