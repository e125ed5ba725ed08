"""The trace reader's fast path (runs of events in torch's layout, read by one regex) gives the analysis that
the JSON scanner gives, on the recorded traces and on any events written in torch's layout, hostile ones too."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.report.model import render_json
from kernelcheck.trace import analysis, reader

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDED = [DATA / "gpu" / "gdn_fallback.json.gz", DATA / "gpu" / "gdn_fast.json.gz",
            DATA / "gpu" / "step-fast.json.gz", DATA / "step" / "cpu_tiny_step.json.gz"]


def _analyse(path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch, chunk: int | None = None,
             ) -> tuple[str, str] | str:
    """(repr of the analysis, its JSON report), or the BadInput message. `chunk`: read in chunks of that many
    bytes (past the first chunk, the fast path reads the file's bytes undecoded)."""
    with monkeypatch.context() as m:
        if chunk is not None:
            m.setattr(reader, "CHUNK", chunk)
        if not fast:
            m.setattr(reader, "_EVENT_END", "\x00no run ends here\x00")
            m.setattr(reader, "_COMPACT_END", "\x00no run ends here\x00")
            m.setattr(reader.TraceReader, "_raw_runs", lambda self, fast, progress: False)
        try:
            an = analysis.analyze_file(path, m=matrix.load())
        except BadInput as exc:
            return str(exc)
    return repr(an), render_json(analysis.report_of(an))


def _fast_share(path: Path) -> float:
    seen = {"fast": 0, "slow": 0}

    def fast(parts: list, n: int) -> None:
        seen["fast"] += n

    def slow(evs: list) -> None:
        seen["slow"] += len(evs)

    reader.TraceReader(path).scan(fast, slow)
    return seen["fast"] / max(1, seen["fast"] + seen["slow"])


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_a_recorded_trace_reads_the_same_through_the_fast_path(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _analyse(path, True, monkeypatch) == _analyse(path, False, monkeypatch)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_the_fast_path_reads_most_of_a_recorded_trace(path: Path) -> None:
    assert _fast_share(path) > 0.9


def torch_layout(events: list[dict], style: str = "2.11", ascii: bool = True) -> str:
    """Events written as torch's profiler writes them: "  {" and "  }" lines, keys in the event's order (torch's
    own order for its events), args last; 2.11 puts several keys on a line, 2.13 one key per line. `ascii`:
    letters outside ASCII escaped (else written as they are, in UTF-8)."""
    out = []
    sep = ", " if style == "2.11" else ",\n    "

    def dumps(v: object) -> str:
        return json.dumps(v, ensure_ascii=ascii)

    for ev in events:
        items = [f"{dumps(k)}: {dumps(v)}" for k, v in ev.items() if k != "args"]
        if "args" in ev:
            items.append('"args": ' + dumps(ev["args"]).replace("{", "{\n      ", 1)[:-1] + "\n    }")
        out.append("  {\n    " + sep.join(items) + "\n  }")
    return ('{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "traceEvents": [\n' + ",\n".join(out)
            + '\n  ],\n  "traceName": "t.json"\n}\n')


_decimal = st.integers(0, 10**9).map(lambda i: round(i / 1000, 3))
_hostile = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=4)
_name = st.sampled_from(["aten::mm", "ProfilerStep#1", "ProfilerStep#2", "cudaLaunchKernel", "cuLaunchKernelEx",
                         "cudaMemcpyAsync", "Memcpy HtoD", "Memset", "void fla::chunk_kernel<{lambda()#1}>",
                         "autograd::engine::evaluate_function: MmBackward0", "kernelcheck::phase::forward",
                         "kernelcheck::layer::attn::L0", "x.py(1): torch_chunk_gated_delta_rule",
                         'a "quoted" \\ name', "é ✓"]) | st.text(max_size=6)
_args = st.fixed_dictionaries({}, optional={
    "External id": st.integers(0, 99), "correlation": st.integers(-3, 40) | _hostile,
    "is_user_annotation": _hostile, "grid": st.lists(st.integers(0, 9), max_size=3),
    "note": st.sampled_from(["}", "{", "a}b", "\"ph\": \"X\"", "ph"])})
_x_event = st.fixed_dictionaries({
    "ph": st.just("X"),
    "cat": st.sampled_from(["cpu_op", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
                            "user_annotation", "python_function", "gpu_user_annotation", "Kernel"]),
    "name": _name, "pid": st.integers(0, 3) | st.just("Spans"), "tid": st.integers(0, 3) | st.just("7"),
    "ts": _decimal | _hostile, "dur": _decimal | _hostile}, optional={"args": _args})
_other_event = st.fixed_dictionaries({
    "ph": st.sampled_from(["f", "s", "i", "M", "X"]), "id": st.integers(0, 40), "pid": st.integers(0, 3),
    "tid": st.integers(0, 3), "ts": _decimal, "cat": st.sampled_from(["ac2g", "fwdbwd"]),
    "name": st.sampled_from(["ac2g", "fwdbwd"])}, optional={"args": _args})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_x_event | _other_event, min_size=2, max_size=14), style=st.sampled_from(["2.11", "2.13"]),
       gz=st.booleans())
def test_any_events_in_torchs_layout_read_the_same_through_the_fast_path(tmp_path: Path, events: list[dict],
                                                                          style: str, gz: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    text = torch_layout(events, style).encode()
    p.write_bytes(gzip.compress(text) if gz else text)
    assert _analyse(p, True, monkeypatch) == _analyse(p, False, monkeypatch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_x_event | _other_event, min_size=2, max_size=30), style=st.sampled_from(["2.11", "2.13"]),
       chunk=st.integers(64, 1200), gz=st.booleans())
def test_any_events_read_as_bytes_read_the_same_as_through_the_json_scanner(tmp_path: Path, events: list[dict],
                                                                             style: str, chunk: int, gz: bool,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """In small chunks, most of the file is read undecoded, as bytes; names with non-ASCII letters, quotes and
    backslashes, and cuts inside a multi-byte letter included."""
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    text = torch_layout(events, style, ascii=False).encode()
    p.write_bytes(gzip.compress(text) if gz else text)
    assert _analyse(p, True, monkeypatch, chunk) == _analyse(p, False, monkeypatch, chunk)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_a_recorded_trace_read_as_bytes_reads_the_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {"bytes": 0}

    def fast(parts: list, n: int) -> None:
        seen["bytes"] += n if type(parts[0]) is bytes else 0

    with monkeypatch.context() as m:
        m.setattr(reader, "CHUNK", 1 << 14)
        reader.TraceReader(path).scan(fast, lambda evs: None)
    assert seen["bytes"] > 0  # the bytes path did read
    assert _analyse(path, True, monkeypatch, 1 << 14) == _analyse(path, False, monkeypatch)


def test_events_in_torchs_layout_are_read_by_the_fast_path(tmp_path: Path) -> None:
    """The property above compares two readers; this checks that the fast one is the one that read."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": 10.5 * i, "dur": 1.25,
               "args": {"External id": i}} for i in range(40)]
    events += [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5.125 * i, "dur": 1.5,
                "args": {"correlation": i, "stream": 7}} for i in range(40)]
    for style in ("2.11", "2.13"):
        p = tmp_path / f"t{style}.json"
        p.write_text(torch_layout(events, style))
        assert _fast_share(p) > 0.95
        an = analysis.analyze_file(p, m=matrix.load())
        assert an.summary.cpu_ops == 40 and an.summary.kernels == 40


def test_a_second_ph_in_an_event_is_read_as_json_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """json keeps the last of a repeated key: a flow event with a second "ph": "X" is an X event."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2.0}] * 3
    text = torch_layout(ev).replace('"ph": "X", "cat"', '"ph": "f", "id": 1, "ph": "X", "cat"', 1)
    p = tmp_path / "dup.json"
    p.write_text(text)
    assert json.loads(text)["traceEvents"][0]["ph"] == "X"
    got = _analyse(p, True, monkeypatch)
    assert got == _analyse(p, False, monkeypatch)
    assert analysis.analyze_file(p, m=matrix.load()).summary.cpu_ops == 3


@pytest.mark.parametrize("chunk", [100, 333, 1 << 20])
def test_names_with_bytes_that_are_not_utf8_read_the_same_as_bytes_and_as_text(tmp_path: Path, chunk: int,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A name holding bytes that are not UTF-8 (cut letters, a stray 0xff) reads as the text decoder reads it
    (each bad sequence replaced), whether the bytes path or the text path read it."""
    names = ["a\udcff", "b\udce2\udc9c", "\udce2\udc9cc", "é✓", "x"]  # surrogateescape: the raw bytes
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 10.5 * i, "dur": 1.25,
               "args": {"External id": i}} for i, n in enumerate(names * 10)]
    events += [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 5.125 * i, "dur": 1.5,
                "args": {"correlation": i, "stream": 7}} for i, n in enumerate(names * 8)]
    p = tmp_path / "t.json"
    p.write_bytes(torch_layout(events, ascii=False).encode("utf-8", "surrogateescape"))
    got = _analyse(p, True, monkeypatch, chunk)
    assert got == _analyse(p, False, monkeypatch, chunk)
    assert "\ufffd" in got[0]  # the bad bytes were read, replaced


def test_a_trace_in_another_layout_costs_the_bytes_path_little(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One line of JSON (json.dump): no event ends as torch's do, so the bytes path gives up after a chunk or two
    (a few times at most), and the JSON scanner reads it, as it did."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1, "ts": 1.5 * i, "dur": 1.0}
              for i in range(3000)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    scanned = []

    class Counting:
        def split(self, raw: bytes) -> list:
            scanned.append(len(raw))
            return _split(raw)

    _split = reader._FAST_BYTES.split
    monkeypatch.setattr(reader, "_FAST_BYTES", Counting())
    assert _analyse(p, True, monkeypatch, 4096) == _analyse(p, False, monkeypatch, 4096)
    assert sum(scanned) <= 3 * p.stat().st_size, (sum(scanned), p.stat().st_size)


@pytest.mark.parametrize("path", RECORDED[:2], ids=lambda p: p.name)  # a GPU trace of each path: the fast lane's CPU
def test_a_one_line_re_dump_reads_the_same_and_mostly_through_the_fast_path(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same events written as one JSON line by another tool (json.dump): the JSON scanner read every event of
    it, 0.8x json.load's speed, where torch's own layout reads at 2.4x; now the one-line layout has its fast path
    too (benchmarks/trace_throughput.py --one-line measures it)."""
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    one = tmp_path / "one-line.json"
    one.write_text(json.dumps(data))
    assert "\n" not in one.read_text()
    # 64 KiB chunks: the first chunk's text run, then the bytes runs (`_raw_runs`), as on a large file
    assert _analyse(one, True, monkeypatch, 1 << 16) == _analyse(one, False, monkeypatch, 1 << 16)
    assert _fast_share(one) > 0.9
