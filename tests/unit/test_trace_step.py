"""trace on whole-step traces (phases, layer types, --annotate) and on hostile input (exit 2, never 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.trace import analysis as tr
from kernelcheck.trace.verdicts import short_name

ROOT = Path(__file__).resolve().parents[2]
STEP = ROOT / "tests" / "data" / "step" / "cpu_tiny_step.json.gz"  # recorded by `verify --step` on CPU
GPU = ROOT / "tests" / "data" / "gpu"


def _kc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelcheck", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_a_whole_step_trace_shows_forward_backward_and_optimizer_and_each_layer_type():
    an = tr.analyze_file(STEP, m=matrix.load())
    b = an.breakdown
    assert b["marked_by"] == "kernelcheck" and b["profiled_steps"] == 2
    assert set(b["phases"]) == {"forward", "backward", "optimizer"}
    assert all(p["ranges"] == 2 and p["ms"] > 0 for p in b["phases"].values())
    lt = b["layer_types"]
    assert lt["linear_attention"]["layers"] == 3 and lt["full_attention"]["layers"] == 1
    assert lt["linear_attention"]["forward"]["ranges"] == 6 and lt["linear_attention"]["backward"]["ranges"] == 6
    # the layers' time lies inside the step's phases
    layers_ms = sum(e[p]["cost_ms"] for t, e in lt.items() if not t.startswith("_") for p in ("forward", "backward"))
    assert layers_ms <= b["phases"]["forward"]["ms"] + b["phases"]["backward"]["ms"]
    assert an.summary.cpu_span_us >= max(s.cpu_span_us for s in an.steps)


@pytest.mark.parametrize("name, want", [
    ("void at::native::(anonymous namespace)::fill_kernel<float>(float*)", "at::native::fill_kernel<...>"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
     "at::native::vectorized_elementwise_kernel<CUDAFunctor_add, ...>"),
    ("chunk_fwd_kernel_o", "chunk_fwd_kernel_o"),
])
def test_kernel_names_are_never_shortened_to_a_bare_namespace(name, want):
    got = short_name(name, 90)
    assert got == want
    assert got.rstrip(":") != "at::native"


def test_deeply_nested_json_is_bad_input(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(BadInput, match="nested too deeply"):
        tr.analyze_file(p, m=matrix.load())


def test_events_with_fields_of_the_wrong_type_are_skipped_and_counted_in_a_warning():
    good = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.0 * i, "dur": 5.0} for i in range(4)]
    bad = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": "soon", "dur": 5.0},
           {"ph": "X", "cat": "kernel", "name": 7, "ts": 3.0, "dur": 1.0, "args": {}}]
    an = tr.analyze_events(good + bad, m=matrix.load())
    found = {f.id: f for f in an.findings}
    malformed = found["trace-malformed-events"]
    assert "2 event(s) had a field of the wrong type" in malformed.message  # wording: renderer test
    assert found["trace-malformed-events"].severity == "warning"
    assert an.summary.cpu_ops == 4
    assert "trace-malformed-events" not in {f.id for f in tr.analyze_events(good, m=matrix.load()).findings}


HOSTILE = {
    "string-ts-numeric-name": {"traceEvents": [{"ph": "X", "cat": "kernel", "name": 5, "ts": "soon", "dur": "x",
                                                "pid": [1], "tid": {}},
                                               {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1e308,
                                                "dur": -5}]},
    "events-not-a-list": {"traceEvents": 5},
    "deep-nesting": None,  # written below: 100 000 nested arrays
}


_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=8))
_value = st.recursive(_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                      max_leaves=6)
_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "M", 3]),
     "cat": st.sampled_from(["cpu_op", "kernel", "gpu_memcpy", "cuda_runtime", "cuda_driver", "user_annotation",
                             "python_function", None, 7])},
    optional={"name": st.one_of(st.sampled_from(["ProfilerStep#1", "cudaLaunchKernel", "aten::mm",
                                                 "kernelcheck::layer::x::L0", "kernelcheck::phase::forward"]),
                                _value),
              "ts": st.one_of(st.floats(0, 1e6), _value), "dur": st.one_of(st.floats(0, 1e4), _value),
              "tid": _value, "pid": _value,
              "args": st.one_of(st.fixed_dictionaries({}, optional={"correlation": _value,
                                                                    "is_user_annotation": _value}), _value)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event, max_size=12), extra=st.dictionaries(st.text(max_size=6), _value, max_size=3))
@example(events=[{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "args": {}, "pid": None, "tid": None,
                  "ts": 0.0},  # found by this fuzzer: a layer range on an unhashable thread id (exit 1 before)
                 {"ph": "X", "cat": "user_annotation", "name": "kernelcheck::layer::x::L0", "args": {}, "ts": 0.0,
                  "pid": None, "dur": 0.0, "tid": []}], extra={})
@example(events=[{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.0, "tid": 7,
                  "args": {"correlation": 1}},  # launches at the same time on an int and a str thread
                 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.0, "tid": "7",
                  "args": {"correlation": 2}},
                 {"ph": "X", "cat": "user_annotation", "name": "kernelcheck::phase::forward", "ts": 0.0,
                  "dur": 5.0, "tid": 7}], extra={})
def test_hostile_trace_json_is_analysed_or_refused_as_bad_input_never_an_internal_error(tmp_path, events, extra):
    p = tmp_path / "hostile.json"
    p.write_text(json.dumps({"traceEvents": events, **extra}, allow_nan=True))
    try:
        an = tr.analyze_file(p, m=matrix.load())
    except BadInput as exc:
        assert str(exc)  # a message, exit 2
        return
    tr.report_of(an)  # and the report renders
    tr.render_text(tr.report_of(an))
