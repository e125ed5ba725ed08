"""The padding picture and numbers read right: the rug ticks sit at the real lengths batches were padded to (not
bin centres), "longest" is the data's longest even where budget:N counts an example at N, and the legend stays
inside the picture. The docs picture is made by scripts/padding_example.py from the same lengths used here."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from kernelcheck.padding import batching, svg, waste

REPO = Path(__file__).resolve().parents[2]


def _example_lengths() -> list[int]:
    spec = importlib.util.spec_from_file_location("padding_example", REPO / "scripts" / "padding_example.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.lengths()


def test_the_rug_ticks_sit_at_the_lengths_batches_were_padded_to() -> None:
    w = waste.measure(range(1, 101), waste.Rule.parse("batch:10"))
    assert sorted(w.pad_to) == list(range(10, 101, 10))
    picture = svg.render(w, "t")
    axis = svg.axis_for(w)
    xs = sorted(float(x) for x in re.findall(r'<line x1="([\d.]+)"[^>]*class="padded-to"', picture))
    want = [round(svg.LEFT + axis.x(n) * (svg.W - svg.LEFT - svg.RIGHT), 1) for n in range(10, 101, 10)]
    assert xs == pytest.approx(want, abs=0.11)


@pytest.mark.parametrize("measure", [lambda ls, r: waste.measure(ls, r), lambda ls, r: batching.measure([ls], r)],
                         ids=["reference", "vectorized"])
def test_longest_is_the_real_longest_when_the_budget_counts_it_at_the_limit(measure) -> None:
    w = measure([5, 20_000, 30], waste.Rule.parse("budget:8192"))
    assert w.longest == 20_000 and w.truncated == 1
    assert waste.as_dict(w)["longest"] == 20_000
    assert svg.counted_longest(w) == 8192  # the axis ends at what was counted


def test_every_label_of_the_docs_picture_fits_inside_it() -> None:
    w = batching.measure([_example_lengths()], waste.Rule.parse("budget:8192"))
    picture = svg.render(w, "chat-lengths.txt: lengths and padding under budget:8192")
    for x, anchor, size, extra, text in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="(\w+)" '
                                                   r'font-size="(\d+)"([^>]*)>([^<]*)</text>', picture):
        if "rotate" in extra:
            continue  # the y-axis titles run up the left margin
        width = svg.text_width(text, int(size))
        left = {"start": float(x), "middle": float(x) - width / 2, "end": float(x) - width}[anchor]
        assert left >= 0 and left + width <= svg.W, (text, left, left + width)


def test_the_docs_picture_is_what_the_command_draws_today() -> None:
    w = batching.measure([_example_lengths()], waste.Rule.parse("budget:8192"))
    drawn = svg.render(w, "chat-lengths.txt: lengths and padding under budget:8192")
    assert (REPO / "docs" / "padding-example.svg").read_text() == drawn, "run python scripts/padding_example.py"


def test_the_examples_clipped_at_the_budget_are_marked_on_the_picture() -> None:
    """budget:N counts an example over N at N: the picture drew them in the last bin with nothing to say so."""
    w = waste.measure([5, 20_000, 30, 9_000, 100], waste.Rule.parse("budget:8192"))
    assert w.truncated == 2
    (label,) = re.findall(r'<text[^>]*class="clipped"[^>]*>([^<]*)</text>', svg.render(w, "t"))
    assert "2 longer" in label and "8,192" in label
    assert 'class="clipped"' not in svg.render(waste.measure([5, 30], waste.Rule.parse("budget:8192")), "t")
