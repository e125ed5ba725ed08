"""The integration half of tests/unit/test_trace_step.py: processes, pip or builds (the in-process tests
are there).

trace on whole-step traces (phases, layer types, --annotate) and on hostile input (exit 2, never 1)."""

from __future__ import annotations

import gzip
import json

import pytest

from tests import envs
from tests.unit.test_report_readback import rendered
from tests.unit.test_trace_step import (  # helpers and fixtures of the in-process half
    GPU,
    HOSTILE,
    STEP,
    _kc,
)


@pytest.mark.integration  # runs `python -m kernelcheck trace`
def test_trace_text_prints_phases_and_layer_types(tmp_path):
    proc = envs.run(["trace", str(STEP), "-o", str(tmp_path / "r.json")], env={"COLUMNS": "100"})  # piped
    assert proc.returncode == 0, proc.stderr
    rep = json.loads((tmp_path / "r.json").read_text())  # the same run's values
    b = rep["breakdown"]
    assert b["marked_by"] == "kernelcheck" and {"forward", "backward"} <= set(b["phases"])
    assert b["layer_types"]["linear_attention"]["layers"] == 3
    # the text is the renderers' from those values (their words: tests/unit/test_report_readback.py's samples)
    assert proc.stdout == rendered(rep)


@pytest.mark.integration  # runs `python -m kernelcheck trace`
def test_annotate_writes_the_findings_back_as_instant_events_that_trace_reads_again(tmp_path):
    out = tmp_path / "annotated.json.gz"
    proc = _kc("trace", str(GPU / "gdn_fallback.json.gz"), "--annotate", str(out), "--json")
    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["trace"]["annotated"]["instant_events"] >= 3
    data = json.loads(gzip.decompress(out.read_bytes()))
    marks = [e for e in data["traceEvents"] if e.get("cat") == "kernelcheck"]
    names = {e["name"] for e in marks}
    assert {"kernelcheck: fla-torch-fallback", "kernelcheck: verdict"} <= names
    assert all(e["ph"] == "i" and "message" in e["args"] for e in marks)
    fla = next(e for e in marks if e["name"] == "kernelcheck: fla-torch-fallback")
    assert fla["ts"] > min(e["ts"] for e in data["traceEvents"] if "ts" in e and e.get("ph") == "X")  # at the kernel
    assert "deviceProperties" in data  # metadata kept
    again = _kc("trace", str(out), "--json")
    assert again.returncode == 3 and json.loads(again.stdout)["summary"]["kernels"] == \
        json.loads(proc.stdout)["summary"]["kernels"]


@pytest.mark.integration  # runs `python -m kernelcheck trace`
def test_annotate_refuses_to_overwrite_its_input(tmp_path):
    src = tmp_path / "t.json.gz"
    src.write_bytes((GPU / "gdn_fast.json.gz").read_bytes())
    proc = _kc("trace", str(src), "--annotate", str(src))
    assert proc.returncode == 2 and "the input trace" in proc.stderr  # wording: renderer test


@pytest.mark.integration  # runs `python -m kernelcheck trace`
def test_launch_delay_is_in_ms_and_a_deep_queue_is_called_good(tmp_path):
    proc = envs.run(["trace", str(GPU / "gdn_fast.json.gz"), "-o", str(tmp_path / "r.json")], env={"COLUMNS": "100"})
    rep = json.loads((tmp_path / "r.json").read_text())  # the same run's values
    assert proc.returncode == 0 and rep["trace"]["launch_bound_steps"] == [], proc.stderr  # a deep queue: GOOD
    assert rep["steps"][0]["launch_delay_us"]
    # the text is the renderers' from those values: the delay in ms, the deep queue called GOOD (their words:
    # tests/unit/test_report_readback.py's samples and tests/unit/test_trace_step.py)
    assert proc.stdout == rendered(rep)


@pytest.mark.integration
def test_a_damaged_gzip_trace_is_bad_input_not_a_crash(tmp_path):
    raw = bytearray((GPU / "gdn_fast.json.gz").read_bytes())
    for i in range(200, 260):  # flip bytes inside the deflate stream: zlib "Error -3 while decompressing data"
        raw[i] ^= 0xFF
    bad = tmp_path / "damaged.json.gz"
    bad.write_bytes(bytes(raw))
    proc = _kc("trace", str(bad))
    assert proc.returncode == 2, proc.stderr
    assert "damaged or truncated" in proc.stderr and "Traceback" not in proc.stderr  # wording: renderer test


@pytest.mark.integration
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_trace_through_the_cli_is_never_exit_1(tmp_path, case):
    p = tmp_path / f"{case}.json"
    p.write_text(json.dumps(HOSTILE[case]) if HOSTILE[case] is not None
                 else '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    proc = _kc("trace", str(p))
    assert proc.returncode in (0, 2, 3), proc.stderr[-2000:]  # analysed, or bad input: never 1 (or 4: trace)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    if proc.returncode == 2:
        assert proc.stderr.startswith("kernelcheck trace: ") and len(proc.stderr.strip().splitlines()) == 1
    else:
        assert proc.stdout.splitlines()[-1].startswith("verdict: ")
