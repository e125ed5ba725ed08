"""JSONL rows that start with their length (`{"length": N, "text": ...}`) are read without decoding each row; the
lengths, and the BadInput of a bad row, are the ones decoding every row gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelcheck.core.errors import BadInput
from kernelcheck.padding import lengths


def _read(path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[int] | str:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(lengths, "_length_rows", lambda block, rows: None)
        try:
            return [int(n) for c in lengths.chunks(str(path)) for n in c]
        except BadInput as exc:
            return str(exc)


_length = st.integers(0, 10_000) | st.sampled_from([-1, 2**41, 1.0, 2.5, "7", None, True, [1, 2]])
_row = st.fixed_dictionaries({"length": _length}, optional={
    "text": st.text(max_size=12), "input_ids": st.lists(st.integers(0, 9), max_size=4),
    "meta": st.fixed_dictionaries({}, optional={"length": st.integers(0, 9)})})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_row.map(json.dumps) | st.sampled_from(['{"length": 5, "length": 9}', "", "[1, 2]",
                                                              '{"length": 007}', '{"text": "x", "length": 3}',
                                                              '{"length": 4}\r']), min_size=1, max_size=10),
       block=st.sampled_from([lengths.BLOCK, 7, 64]))
def test_rows_read_fast_give_the_lengths_decoding_gives(tmp_path: Path, rows: list[str], block: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(lengths, "BLOCK", block)
    assert _read(p, True, monkeypatch) == _read(p, False, monkeypatch)


def test_rows_that_start_with_their_length_are_read_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"length": i, "text": "a b " * i}) + "\n" for i in range(1, 500)))
    decoded: list[bytes] = []
    real = lengths._rows
    monkeypatch.setattr(lengths, "_rows", lambda block, *a: decoded.append(block) or real(block, *a))
    assert [int(n) for c in lengths.chunks(str(p)) for n in c] == list(range(1, 500))
    assert decoded == []
