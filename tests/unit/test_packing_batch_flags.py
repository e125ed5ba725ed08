"""verify --packing --batch: an empty path is refused (it ran another check, exit 4), a JUnit file the packing
report cannot fill is refused before the run (it was accepted and never written), and a sparse or meta-device
input_ids is bad input naming the key (it was exit 1). -o FILE.json being written: tests/integration/
test_hostile_packing_batch.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core.errors import BadInput
from kernelcheck.packing import batchfile

VERIFY = ["verify", "--model", "qwen3.8-27b", "--packing"]


@pytest.mark.parametrize("args,words", [(["--batch", ""], "--batch is empty"),
                                        (["--batch", " "], "--batch is empty"),
                                        (["--collator", "", "--lengths", "x"], "--collator is empty"),
                                        (["--batch", "b.pt", "--junit", "r.xml"], "--junit r.xml"),
                                        (["--batch", "b.pt", "-o", "r.xml"], "-o r.xml")])
def test_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                                      words: str) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, [*VERIFY, *args])
    assert res.exit_code == 2 and words in res.output, res.output
    assert not (tmp_path / "r.xml").exists() or (tmp_path / "r.xml").read_text().count("<testcase") <= 1


def _ids() -> torch.Tensor:
    return torch.arange(1, 11).reshape(1, 10)


@pytest.mark.parametrize("make,kind", [(lambda: _ids().to_sparse(), "sparse_coo"),
                                       (lambda: torch.empty(1, 10, dtype=torch.long, device="meta"), "meta")])
def test_a_sparse_or_meta_input_ids_is_bad_input(tmp_path: Path, make, kind: str) -> None:
    batch = {"input_ids": make(), "position_ids": torch.arange(10).reshape(1, 10)}
    with pytest.raises(BadInput) as got:
        batchfile.check(batch, "b.pt")
    assert f"'input_ids' is a {kind} tensor" in got.value.message
    torch.save(batch, tmp_path / "b.pt")
    with pytest.raises(BadInput):
        batchfile.load(str(tmp_path / "b.pt"))  # the file as a user saved it: exit 2 either way
