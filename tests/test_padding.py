"""`kernelcheck padding` on generated data whose waste is computed independently here."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

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
    assert f"{padded - sum(lengths):,} padding" in text and "packing      at most" in text


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
    assert code == 2 and "budget:TOKENS" in out


def test_plot_renders_to_png_when_rsvg_convert_is_here(tmp_path: Path) -> None:
    import shutil
    import subprocess

    import pytest

    if shutil.which("rsvg-convert") is None:
        pytest.skip("rsvg-convert not installed (apt-get install librsvg2-bin)")
    f = tmp_path / "l.txt"
    f.write_text("\n".join(str(n) for n in range(1, 2000, 7)) + "\n")
    svg, png = tmp_path / "o.svg", tmp_path / "o.png"
    assert _run(str(f), "--plot", str(svg), "--batching", "batch:16")[0] == 0
    subprocess.run(["rsvg-convert", str(svg), "-o", str(png)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
