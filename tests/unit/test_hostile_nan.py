"""A trace whose kernel durations or times are NaN or Infinity (JSON no profiler writes) is bad input (exit 2),
never READY over "GPU busy nan us (100%)"; and every JSON kernelcheck prints is strict JSON: no bare NaN or
Infinity, which jq, JSON.parse and Go reject (core/jsonout.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core import jsonout


def _strict(text: str) -> object:
    def refuse(token: str) -> None:
        raise AssertionError(f"bare {token} in the JSON")
    return json.loads(text, parse_constant=refuse)


def _trace(path: Path, dur: float, field: str = "dur") -> Path:
    evs = [{"ph": "X", "cat": "kernel", "name": "sm90_gemm", "ts": i * 10.0, "dur": 4.0, "pid": 0, "tid": 7,
            "args": {"device": 0, "stream": 7, "correlation": i}} for i in range(40)]
    evs += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": i * 10.0 - 2, "dur": 1.0, "pid": 1,
             "tid": 1, "args": {"correlation": i}} for i in range(40)]
    for e in evs[:40]:
        e[field] = dur
    path.write_text(json.dumps({"traceEvents": evs}))  # Python writes NaN / Infinity bare, as another tool may
    return path


@pytest.mark.parametrize("value,field", [(float("nan"), "dur"), (float("inf"), "dur"), (float("nan"), "ts"),
                                         (float("-inf"), "ts")])
def test_a_trace_with_non_finite_kernel_times_is_bad_input(tmp_path: Path, value: float, field: str) -> None:
    res = CliRunner().invoke(main, ["trace", str(_trace(tmp_path / "t.json", value, field)), "--json"])
    assert res.exit_code == 2, res.output  # was READY (exit 0), "GPU busy nan us (100%)"
    assert "NaN or Infinity" in res.output  # wording: the exit-2 message names what is wrong
    _strict(res.output.split("\nkernelcheck trace:")[0])


def test_the_same_trace_with_finite_times_still_reads(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["trace", str(_trace(tmp_path / "t.json", 4.0)), "--json"])
    assert res.exit_code in (0, 3, 4), res.output
    data = _strict(res.output)
    assert isinstance(data, dict) and data["command"] == "trace"


def test_json_output_writes_non_finite_numbers_as_null() -> None:
    out = jsonout.dumps({"a": float("nan"), "b": [1.0, float("inf"), {"c": float("-inf")}], "d": (2.5,)})
    assert _strict(out) == {"a": None, "b": [1.0, None, {"c": None}], "d": [2.5]}


def test_a_report_holding_nan_renders_strict_json() -> None:
    from kernelcheck.report import model

    class Fake:
        def to_json(self) -> dict[str, object]:
            return {"verdict": "ready", "gpu_busy_us": float("nan")}

    assert _strict(model.render_json(Fake())) == {"verdict": "ready", "gpu_busy_us": None}  # type: ignore[arg-type]
