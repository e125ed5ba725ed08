"""verify --packing --batch -o FILE.json writes the report it prints with --json (it was accepted and never
written). A real packed batch from transformers' collator, the tiny CPU model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from kernelcheck.cli.main import main

pytestmark = pytest.mark.integration


def test_output_file_holds_the_packing_report(tmp_path: Path) -> None:
    from transformers import DataCollatorWithFlattening

    batch = dict(DataCollatorWithFlattening()([{"input_ids": list(range(1, n + 1))} for n in (20, 30)]))
    torch.save(batch, tmp_path / "b.pt")
    out = tmp_path / "reports" / "packing.json"
    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--packing", "--batch", str(tmp_path / "b.pt"),
                                    "-o", str(out)])
    assert out.is_file(), res.output
    rep = json.loads(out.read_text())
    assert rep["exit_code"] == res.exit_code and rep["batch"]["segments"] == [[0, 20], [20, 50]]


@pytest.mark.parametrize("length", ["1000000000", "1000000000000"])
@pytest.mark.parametrize("source", [["--benchmark"], ["--collator", "transformers:DataCollatorWithFlattening"]])
def test_lengths_that_cannot_fit_are_refused_up_front(tmp_path: Path, length: str, source: list[str]) -> None:
    (tmp_path / "l.txt").write_text(length + "\n")
    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--packing", *source, "--lengths",
                                    str(tmp_path / "l.txt")])
    assert res.exit_code == 2 and f"{int(length):,} tokens" in res.output, res.output  # was killed / exit 1


def test_verify_compile_with_tokens_past_memory_is_refused_at_once() -> None:
    from kernelcheck.verify import packing_bounds

    tokens = packing_bounds.max_tokens() * 2
    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--compile", "--tokens", str(tokens)])
    assert res.exit_code == 2 and f"{tokens:,}" in res.output, res.output
