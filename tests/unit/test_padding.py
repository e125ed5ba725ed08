"""`kernelcheck padding` on generated data whose waste is computed independently here."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["padding", *args])
    return res.exit_code, res.output


def _expected_budget(lengths: list[int], budget: int) -> tuple[int, int]:
    """Padded tokens and steps for pad-to-longest under a token budget, written without the module's code."""
    padded, steps, i = 0, 0, 0
    while i < len(lengths):
        j = i + 1
        while j < len(lengths) and (j - i + 1) * max(lengths[i:j + 1]) <= budget:
            j += 1
        padded += max(lengths[i:j]) * (j - i)
        steps += 1
        i = j
    return padded, steps


def test_fixed_batch_size_on_a_lengths_file_reports_the_exact_waste(tmp_path: Path) -> None:
    f = tmp_path / "lengths.txt"
    f.write_text("\n".join(["100", "300"] * 50) + "\n")  # each batch of 2: 300*2 computed, 200 padding
    code, out = _run(str(f), "--batching", "batch:2", "--json")
    assert code == 0
    p = json.loads(out)["padding"]
    assert (p["real_tokens"], p["padded_tokens"], p["pad_tokens"], p["steps"]) == (20000, 30000, 10000, 50)
    assert p["wasted_tokens_per_step"] == 200.0
    assert p["padding_fraction"] == round(1 / 3, 6)
    assert p["packing_speedup_bound"] == 1.5


def test_token_budget_on_jsonl_input_ids_matches_an_independent_count(tmp_path: Path) -> None:
    rng = random.Random(7)
    lengths = [rng.choice([rng.randint(20, 400), rng.randint(1500, 8192)]) for _ in range(2000)]
    f = tmp_path / "train.jsonl"
    with f.open("w") as fh:
        for n in lengths:
            fh.write(json.dumps({"input_ids": [1] * n, "meta": "x"}) + "\n")
    padded, steps = _expected_budget(lengths, 8192)
    code, out = _run(str(f), "--json")
    p = json.loads(out)["padding"]
    assert code == 0 and p["rule"] == "budget:8192"
    assert (p["real_tokens"], p["padded_tokens"], p["steps"]) == (sum(lengths), padded, steps)
    assert p["packing_speedup_bound"] == round(padded / sum(lengths), 4)
    code, text = _run(str(f))
    assert f"{padded - sum(lengths):,} padding" in text and "packing      at most" in text  # wording: renderer test


def test_packing_rule_has_no_padding(tmp_path: Path) -> None:
    f = tmp_path / "l.txt"
    f.write_text("3000\n3000\n3000\n")
    p = json.loads(_run(str(f), "--batching", "packing:4096", "--json")[1])["padding"]
    assert (p["pad_tokens"], p["steps"], p["packing_speedup_bound"]) == (0, 3, 1.0)


def test_plot_is_an_svg_histogram_with_the_padding_marked(tmp_path: Path) -> None:
    f = tmp_path / "l.txt"
    f.write_text("\n".join(["10", "1000"] * 20) + "\n")
    svg = tmp_path / "out.svg"
    code, _ = _run(str(f), "--batching", "batch:2", "--plot", str(svg))
    assert code == 0
    root = ET.parse(svg).getroot()
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    pad = [r for r in rects if r.get("class") == "pad"]
    real = [r for r in rects if r.get("class") == "real"]
    assert real and len(pad) == 1  # only the short examples carry padding (990 each)
    assert "19800 padding tokens" in "".join(pad[0].itertext())


def test_bad_inputs_exit_2_with_one_paragraph(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    nocol = tmp_path / "nocol.jsonl"
    nocol.write_text(json.dumps({"text": "hello"}) + "\n")
    garbage = tmp_path / "bad.txt"
    garbage.write_text("12\nnot a number\n")
    pq = tmp_path / "d.parquet"
    pq.write_bytes(b"PAR1 not really")
    cases = {str(empty): "empty", str(nocol): "no length column", str(garbage): "not an integer",
             str(tmp_path / "missing.jsonl"): "no such file", str(pq): "arquet"}
    for path, words in cases.items():
        code, out = _run(path)
        assert code == 2, out
        assert words in out and "Traceback" not in out and out.strip().count("\n") == 0
    code, out = _run(str(garbage), "--batching", "pad:3")
    assert code == 2 and "budget:TOKENS" in out  # wording: renderer test (exit-2 message)


# --- the picture: reads at a glance (labelled ticks, log lengths when skewed, a true histogram, the budget) ---

SVG_NS = "{http://www.w3.org/2000/svg}"


def _skewed(tmp_path: Path) -> Path:
    r = random.Random(3)
    f = tmp_path / "chat.txt"
    f.write_text("\n".join(str(max(1, min(6000, int(r.lognormvariate(3.4, 1.2))))) for _ in range(3000)) + "\n")
    return f


def _texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG_NS}text")]


def test_skewed_lengths_get_a_log_axis_labelled_ticks_and_a_true_histogram(tmp_path: Path) -> None:
    f = _skewed(tmp_path)
    svg = tmp_path / "p.svg"
    code, out = _run(str(f), "--batching", "budget:8192", "--plot", str(svg), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["plot"] == {"file": str(svg), "format": "svg", "bins": data["plot"]["bins"], "scale": "log"}
    assert data["padding"]["median"] * 8 <= data["padding"]["longest"]
    root = ET.parse(svg).getroot()
    rects = list(root.iter(f"{SVG_NS}rect"))
    counts = [r for r in rects if r.get("class") == "count"]
    # the top panel is a histogram: one bar per non-empty bin, its counts summing to the examples
    assert sum(int("".join(r.itertext()).split(": ")[1].split(" ")[0].replace(",", "")) for r in counts) == 3000
    texts = _texts(root)
    for tick in ("1", "10", "100", "1k"):  # log-scale length ticks, more than two, labelled
        assert tick in texts
    assert sum(t in texts for t in ("0", "100", "200", "300", "400", "500")) >= 3  # y ticks
    assert any(t.startswith("log scale") or "log scale" in t for t in texts)  # the bin width is said
    assert any(t.startswith("budget 8,192 tokens") for t in texts)  # the budget, beyond the longest here
    assert any(t.startswith("median ") for t in texts)
    assert any(r.get("class") == "pad" for r in rects)  # wasted tokens marked
    assert list(root.iter(f"{SVG_NS}line"))


def test_every_left_aligned_label_fits_inside_the_picture(tmp_path: Path) -> None:
    """The legend's third item (the rug of padded-to lengths) ran off the right edge of the PNG at 20,000
    examples; a label that does not fit goes on its own line (the width is estimated as the renderer does)."""
    r = random.Random(3)
    f = tmp_path / "lens.txt"
    f.write_text("\n".join(str(int(min(8192, r.lognormvariate(4.5, 1.0)))) for _ in range(20000)) + "\n")
    svg = tmp_path / "p.svg"
    code, _ = _run(str(f), "--batching", "budget:8192", "--plot", str(svg))
    assert code == 0
    root = ET.parse(svg).getroot()
    width = float(root.get("width") or 0)
    for t in root.iter(f"{SVG_NS}text"):
        if t.get("text-anchor", "start") == "start":
            assert float(t.get("x") or 0) + 7.0 * len("".join(t.itertext())) <= width, "".join(t.itertext())


def test_even_lengths_get_a_linear_axis_with_the_bin_width_and_the_budget_line(tmp_path: Path) -> None:
    f = tmp_path / "l.txt"
    f.write_text("\n".join(str(n) for n in range(200, 2000, 3)) + "\n")
    svg = tmp_path / "p.svg"
    code, out = _run(str(f), "--batching", "budget:2500", "--plot", str(svg))
    assert code == 0
    root = ET.parse(svg).getroot()
    texts = _texts(root)
    assert any("bin width 100 tokens" in t for t in texts)  # 40 bins over 1..2,500 (the budget)
    assert sum(t in texts for t in ("500", "1k", "1.5k", "2k")) == 4
    assert [ln for ln in root.iter(f"{SVG_NS}line") if ln.get("class") == "limit"]  # the budget line
    assert [ln for ln in root.iter(f"{SVG_NS}line") if ln.get("class") == "padded-to"]  # batch boundaries
    plot_line = [ln for ln in out.splitlines() if ln.lstrip().startswith("plot")]
    assert plot_line and str(svg) in plot_line[0] and "SVG" in plot_line[0]  # the text says where it went
    assert out.splitlines()[-1].startswith("padding: ")


def test_png_is_refused_with_exit_2_before_reading_when_nothing_renders_it(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.padding import plot

    monkeypatch.setattr(plot, "renderer", lambda: None)
    f = tmp_path / "l.txt"
    f.write_text("10\n20\n")
    png = tmp_path / "p.png"
    code, out = _run(str(tmp_path / "missing.txt"), "--plot", str(png))  # refused before the data is opened
    assert code == 2 and "PNG" in out and "cairosvg" in out \
        and not png.exists()  # wording: renderer test (exit-2 message)
    code, out = _run(str(f), "--plot", str(tmp_path / "p.jpg"))
    assert code == 2 and ".svg" in out  # wording: renderer test (exit-2 message)


def test_quiet_prints_the_padding_line_only(tmp_path: Path) -> None:
    f = tmp_path / "l.txt"
    f.write_text("10\n1000\n")
    code, out = _run(str(f), "--batching", "batch:2", "-q")
    assert code == 0 and out.strip().splitlines() == [out.strip()] and out.startswith("padding: ")
