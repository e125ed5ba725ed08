"""verify --packing refuses, up front and in words, what cannot be checked here: a packed row whose forward and
backward cannot fit the available memory (a 65,536-token row was killed after 8 GiB; --lengths 10^9 was killed,
10^12 exit 1), more segments than it can re-run alone (2,000 ran over 300 s with no output), a batch file that is
a dataset (2 GiB was exit 1 after 7.3 GiB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcheck.core.errors import BadInput
from kernelcheck.verify import packing_bounds as pb

GIB = 1 << 30


@pytest.mark.parametrize("tokens", [65_536, 10**9, 10**12])
def test_a_row_that_cannot_fit_8_gib_is_refused_with_the_estimate(tokens: int) -> None:
    with pytest.raises(BadInput) as got:
        pb.check_row(tokens, 4, "the batch", available=8 * GIB)
    assert f"{tokens:,} tokens" in got.value.message and "8.0 GiB is available" in got.value.message


def test_a_row_that_fits_runs() -> None:
    pb.check_row(4_096, 8, "the batch", available=8 * GIB)
    assert pb.max_tokens(8 * GIB) == 32_768


def test_more_segments_than_can_be_rerun_alone_is_refused() -> None:
    with pytest.raises(BadInput) as got:
        pb.check_row(4_000, 2_000, "the batch", available=64 * GIB)
    assert "2,000 segments" in got.value.message
    pb.check_lengths([16] * pb.MAX_SEGMENTS, "--lengths")


def test_a_batch_file_the_size_of_a_dataset_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "b.pt"
    with open(big, "wb") as fh:
        fh.truncate(pb.MAX_BATCH_FILE + 1)  # sparse: no disk written
    with pytest.raises(BadInput, match="reads at most"):
        pb.check_file(str(big))


def test_verify_tokens_on_the_cpu_past_memory_is_refused() -> None:
    with pytest.raises(BadInput) as got:
        pb.check_tokens(100_000, "--tokens with --compile", available=8 * GIB)  # was killed after 262 s
    assert "100,000" in got.value.message
    pb.check_tokens(8_192, "--tokens", available=8 * GIB)
