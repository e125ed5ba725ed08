"""A rank's record as typed values (fleet/record.py): read once where it arrives (a compared file through
report_check, a gathered blob), compared on its fields, and why a rank is missing as a kind (gather.py's
constants), never the words of the reason. The real torchrun runs are in tests/integration/test_fleet.py."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core.status import EXIT_BROKEN, EXIT_FALLBACK, Status, Verdict
from kernelcheck.fleet import compare, gather, summary, table
from kernelcheck.fleet.gather import DIED, KINDS, NEVER_JOINED, NO_REPORT, UNREADABLE, Missing
from kernelcheck.fleet.ranks import RankInfo
from kernelcheck.fleet.record import RankRecord

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
REAL = ["doctor_train.json", "doctor_infer.json", "verify.json", "verify_step.json"]


def _real(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPORTS / name).read_text())
    return data


@pytest.mark.parametrize("name", REAL)
def test_a_real_report_summarises_to_typed_values_that_pack_and_read_back(name: str) -> None:
    data = _real(name)
    rec = summary.summarise(data, rank=3, host="node03")
    assert isinstance(rec, RankRecord) and rec.verdict is Verdict(data["verdict"])
    assert rec.exit_code == data["exit_code"] and not rec.stopped
    assert [(f.name, f.status) for f in rec.functions] == [(f["name"], Status(f["status"])) for f in data["functions"]]
    assert all(isinstance(f.status, Status) for f in rec.functions)
    assert [f.id for f in rec.findings] == [f["id"] for f in data["findings"]]
    back = summary.unpack(summary.pack(rec))
    assert back == rec and back.to_json() == rec.to_json()
    assert len(summary.pack(rec)) < 4096


def test_an_error_record_reads_back_as_a_stopped_check() -> None:
    rec = summary.summarise({"schema": "kernelcheck.error/1", "command": "doctor", "verdict": None, "exit_code": 2,
                             "error": "x" * 400}, rank=1, host="h")
    assert rec.stopped and rec.verdict is None and rec.exit_code == 2 and len(rec.error or "") == 160
    assert summary.unpack(summary.pack(rec)) == rec
    assert list(rec.to_json()) == ["schema", "command", "verdict", "exit_code", "error", "rank", "host", "kernelcheck"]


@pytest.mark.parametrize("blob", [
    b"not zlib", zlib.compress(b"not json"), zlib.compress(b"[1, 2]"), zlib.compress(b'{"verdict": "ready"}'),
    zlib.compress(json.dumps({"exit_code": 0, "verdict": "excellent"}).encode()),
    zlib.compress(json.dumps({"exit_code": "0", "verdict": "ready"}).encode()),
    zlib.compress(json.dumps({"exit_code": 3, "verdict": "fallback", "functions": [{"name": "f", "status": "slow"}]})
                  .encode()),
])
def test_a_gathered_blob_that_is_not_a_record_is_a_value_error(blob: bytes) -> None:
    with pytest.raises(ValueError, match="not a"):
        summary.unpack(blob)


def test_read_blobs_keeps_the_readable_ranks_and_names_the_others() -> None:
    good = summary.pack(summary.summarise(_real("doctor_train.json"), rank=0, host="a"))
    records, bad = gather.read_blobs([good, b"garbage", good])
    assert [r.rank for r in records] == [0, 0] and list(bad) == [1]


def test_a_missing_kind_is_one_of_the_constants() -> None:
    assert set(KINDS) == {NEVER_JOINED, DIED, UNREADABLE, NO_REPORT}
    with pytest.raises(ValueError):
        Missing("walked off")


def test_the_fleet_json_names_each_missing_ranks_kind() -> None:
    recs = [summary.summarise(_real("doctor_train.json"), rank=0)]
    missing = {2: Missing(DIED), 1: Missing(NEVER_JOINED), 3: Missing(UNREADABLE)}
    js = table.to_json("doctor", recs, missing, table.fleet_code(recs, missing))
    assert [(m["rank"], m["kind"]) for m in js["missing"]] == [(1, NEVER_JOINED), (2, DIED), (3, UNREADABLE)]
    assert js["exit_code"] == EXIT_BROKEN and js["ranks"] == [recs[0].to_json()]


def _write(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    (tmp_path / name).write_text(json.dumps(data))
    return str(tmp_path / name)


def test_compare_reads_each_file_once_into_a_record_and_counts_what_never_arrived(tmp_path: Path) -> None:
    paths = [_write(tmp_path, f"{n}.json", _real("doctor_train.json")) for n in ("node1", "node2")]
    records, missing = compare.collect(paths, expect=4)
    assert [r.label for r in records] == ["node1", "node2"] and all(isinstance(r, RankRecord) for r in records)
    assert {r: (m.kind, m.expected, m.found) for r, m in missing.items()} == {2: (NO_REPORT, 4, 2),
                                                                               3: (NO_REPORT, 4, 2)}
    assert table.fleet_code(records, {}) == EXIT_FALLBACK and table.fleet_code(records, missing) == EXIT_BROKEN


def test_a_stopped_run_that_recorded_its_environment_is_checked_field_by_field(tmp_path: Path) -> None:
    """An error report that still carries an environment is read as a record: its fields are held to their types
    first (exit 2 naming the field), never a crash in the reading."""
    from kernelcheck.core.errors import BadInput

    data = {**_real("doctor_train.json"), "verdict": None, "exit_code": 1, "error": "stopped"}
    data["functions"] = [{"name": "f", "status": "slow"}]
    with pytest.raises(BadInput, match=r'field "functions\[0\].status"'):
        compare.load(Path(_write(tmp_path, "a.json", data)))


# -- the gate's decisions on a fake store (no processes): unreadable blobs are missing ranks of their kind ----------

class _Store:
    """The part of a TCPStore the gate uses, in memory; `others` ranks have joined and read already."""

    def __init__(self, others: int) -> None:
        self.keys: dict[str, str] = {}
        self.counters = {"joined": others, "read": others}

    def set(self, key: str, value: str) -> None:
        self.keys[key] = value

    def add(self, key: str, n: int) -> int:
        self.counters[key] = self.counters.get(key, 0) + n
        return self.counters[key]

    def wait(self, keys: list[str], timeout: Any) -> None:
        if not all(k in self.keys for k in keys):
            raise TimeoutError(keys)

    def check(self, keys: list[str]) -> bool:
        return all(k in self.keys for k in keys)

    def get(self, key: str) -> bytes:
        return self.keys[key].encode()


def test_rank_0_names_a_rank_whose_record_it_cannot_read_as_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _Store(others=1)
    mine = summary.summarise(_real("doctor_train.json"), rank=0, host="a")
    monkeypatch.setattr(gather, "open_store", lambda info, timeout: store)
    monkeypatch.setattr(gather, "_gather_records", lambda s, info, blob, timeout: [blob, b"from another version"])
    monkeypatch.setattr(gather, "_destroy", lambda: None)
    info = RankInfo(0, 2, 0, "127.0.0.1", 29500, "env", False, "t", "a")
    out = gather.gate(mine, info, 1.0, table.fleet_code)
    assert out.exit_code == EXIT_BROKEN and [r.rank for r in out.records] == [0]
    assert {r: m.kind for r, m in out.missing.items()} == {1: UNREADABLE}
    assert json.loads(store.keys["verdict"])["exit_code"] == EXIT_BROKEN
    assert out.readers == 1  # the unreadable rank is alive: it reads the verdict


def test_rank_0_names_the_ranks_that_never_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _Store(others=0)
    monkeypatch.setattr(gather, "open_store", lambda info, timeout: store)
    info = RankInfo(0, 3, 0, "127.0.0.1", 29500, "env", False, "t", "a")
    out = gather.gate(summary.summarise(_real("doctor_train.json"), rank=0), info, 0.01, table.fleet_code)
    assert out.exit_code == EXIT_BROKEN and {r: m.kind for r, m in out.missing.items()} == {1: NEVER_JOINED,
                                                                                               2: NEVER_JOINED}
    assert out.readers == 0


def test_rank_0_names_a_rank_that_died_in_the_gather_as_died(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _Store(others=2)
    store.counters["done"] = 2  # both others finished their part, but rank 2 never set its done key: it died
    store.keys["done/1"] = "1"
    monkeypatch.setattr(gather, "open_store", lambda info, timeout: store)
    monkeypatch.setattr(gather, "_gather_records", lambda s, info, blob, timeout: None)
    info = RankInfo(0, 3, 0, "127.0.0.1", 29500, "env", False, "t", "a")
    out = gather.gate(summary.summarise(_real("doctor_train.json"), rank=0), info, 0.01, table.fleet_code)
    assert out.exit_code == EXIT_BROKEN and {r: m.kind for r, m in out.missing.items()} == {2: DIED}
    assert out.readers == 1


def test_differences_are_typed_fields_of_the_odd_group() -> None:
    train, infer = _real("doctor_train.json"), _real("doctor_infer.json")
    recs = [summary.summarise(d, label=n) for n, d in (("a", train), ("b", infer), ("c", train))]
    (odd,) = table.differences(recs)
    assert odd.ranks == ["b"]
    mode = next(f for f in odd.fields if f.field == "mode")
    assert (mode.value, mode.others) == (infer["mode"], train["mode"])
    assert table.to_json("compare", recs, {}, EXIT_FALLBACK)["differences"] == [odd.to_json()]
