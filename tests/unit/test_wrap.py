"""Piped and terminal text fits its width and never splits an identifier: every sample report (tests/data/reports/
and the recorded reports the docs render, docs/gpu/*.json) rendered at 80 and 100 columns, and every generated
sample in the docs (scripts/doc_samples.py) at 100."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelcheck.core.outcome import Outcome
from kernelcheck.install import command as install_cmd
from kernelcheck.report.model import Report
from kernelcheck.report.terminal import Terminal, present, wrap_line
from kernelcheck.report.text import render_text
from kernelcheck.report.wrap import break_word
from kernelcheck.trace import render as trace_render

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "tests" / "data" / "reports").glob("*.json")) + sorted(
    (REPO / "docs" / "measurements" / "2026-12-02-h200-doctor-7552758").glob("*.json"))
NAME = re.compile(r"[A-Za-z0-9_]{3,}")


def _text(path: Path) -> str:
    data = json.loads(path.read_text())
    rep = Report.from_json(data)
    if rep.command == "trace":
        return trace_render.render_text(rep)
    if rep.command == "install":
        return install_cmd.render(Outcome.of_exit(rep, data["exit_code"]), True, False)
    return render_text(rep, verbose=False)


def _fits(line: str, width: int) -> bool:
    """A line fits, or is one name longer than the whole width (kept whole rather than cut)."""
    return len(line) <= width or (" " not in line.strip() and len(line.strip()) > width)


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_sample_report_fits_the_width_and_keeps_every_name_whole(path: Path, width: int) -> None:
    text = _text(path)
    out = present(text, Terminal(width=width))
    too_long = [ln for ln in out.splitlines() if not _fits(ln, width)]
    assert not too_long, too_long[:3]
    cut = set(NAME.findall(out)) - set(NAME.findall(text))  # a name cut in two shows up as new pieces
    assert not cut, sorted(cut)[:6]


def _doc_samples() -> list[tuple[str, str]]:
    marker = re.compile(r"^<!-- sample: ([a-z0-9-]+) -->\n```text\n(.*?)^```$", re.M | re.S)
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [(f"{doc.name}:{m.group(1)}", "\n".join(m.group(2).splitlines()[1:]))  # after the "$ kernelcheck" line
            for doc in docs for m in marker.finditer(doc.read_text(encoding="utf-8"))]


def test_the_samples_in_the_docs_fit_100_columns_and_rewrap_to_80_without_cutting_a_name() -> None:
    samples = _doc_samples()
    assert len(samples) >= 5
    for name, text in samples:
        assert all(_fits(ln, 100) for ln in text.splitlines()), (name, [ln for ln in text.splitlines()
                                                                      if len(ln) > 100])
        narrow = present(text, Terminal(width=80))  # what a narrower reader gets from the same lines
        assert all(_fits(ln, 80) for ln in narrow.splitlines()), (name, [ln for ln in narrow.splitlines()
                                                                        if not _fits(ln, 80)][:3])
        assert not set(NAME.findall(narrow)) - set(NAME.findall(text)), name


def test_a_module_path_is_cut_after_a_dot_never_inside_a_name() -> None:
    path = "transformers.models.qwen3_5.modeling_qwen3_5.torch_chunk_gated_delta_rule"
    lines = wrap_line("              evidence: implementation_called=" + path + ", path=torch", 60)
    assert all(len(ln) <= 60 for ln in lines)
    assert set(NAME.findall("\n".join(lines))) <= set(NAME.findall(path)) | {"evidence", "implementation_called",
                                                                              "path", "torch"}
    assert "".join(ln.strip() for ln in lines).replace("path=torch", "") .endswith("torch_chunk_gated_delta_rule,")


def test_a_name_longer_than_the_room_moves_left_and_stays_whole() -> None:
    name = "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4"
    lines = break_word(name, " " * 30, 100, 2)
    assert [ln.strip() for ln in lines] == [name] and len(lines[0]) <= 100  # moved left, never cut
    assert break_word("a.b.c", "  ", 100, 0) == ["  a.b.c"]


@pytest.mark.parametrize("command", ["", "doctor", "verify", "install", "hub", "trace", "padding", "models", "warm",
                                     "compare"])
def test_every_help_page_fits_100_columns_on_a_narrow_terminal(command: str) -> None:
    """click wraps a help page's prose to the terminal, but its examples are verbatim: each must fit as written."""
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    res = CliRunner().invoke(main, [*command.split(), "--help"], terminal_width=80)
    assert res.exit_code == 0, res.output
    long = [line for line in res.output.splitlines() if len(line) > 100]
    assert long == [], long
