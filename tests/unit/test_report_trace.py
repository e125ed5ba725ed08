"""The trace report holds typed values (report/trace.py): an analysis fills them (trace/render.report_of), they
give the JSON `kernelcheck trace` always printed and read back from it, and the text is made from their fields."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.report.model import Report, render_json
from kernelcheck.report.text import render_text as report_text
from kernelcheck.report.trace import (
    Annotated,
    FallbackSignature,
    KernelCount,
    KernelTotal,
    LaunchDelay,
    StepRow,
    TraceFile,
    TraceSection,
)
from kernelcheck.trace import analysis
from kernelcheck.trace import render as trace_render

DATA = Path(__file__).resolve().parents[1] / "data"
FALLBACK = DATA / "gpu" / "gdn_fallback.json.gz"


def sample() -> dict:
    return json.loads((DATA / "reports" / "trace_fallback.json").read_text())


def test_the_recorded_trace_report_reads_back_as_typed_values() -> None:
    data = sample()
    sec = Report.from_json(data).trace
    assert isinstance(sec, TraceSection) and isinstance(sec.trace, TraceFile) and isinstance(sec.summary, StepRow)
    assert sec.trace.diagnosis == "fallback" and sec.trace.annotated is None and sec.breakdown is None
    assert [m.id for m in sec.trace.fallback_signatures] == ["fla-torch-fallback", "causal-conv1d-torch-fallback"]
    assert sec.trace.fallback_signatures[0] == FallbackSignature.from_json(data["trace"]["fallback_signatures"][0])
    assert sec.trace.missing_packages == ["fla-core", "causal-conv1d"]
    assert (sec.summary.name, sec.summary.kernels, sec.summary.launch_delay_us.count) == ("trace", 1230, 1230)
    assert [s.name for s in sec.steps] == ["ProfilerStep#1"]
    top = sec.summary.top_kernels_by_count[0]
    assert isinstance(top, KernelCount) and top.count == 256
    assert isinstance(sec.summary.top_kernels_by_time[0], KernelTotal)
    # the two top lists give their keys in different orders, as the analysis always wrote them
    assert list(top.to_json()) == ["name", "count", "total_us"]
    assert list(sec.summary.top_kernels_by_time[0].to_json()) == ["name", "total_us", "count"]
    assert sec.to_json() == {k: data[k] for k in ("trace", "summary", "steps")}


def test_an_analysis_fills_the_same_values_the_recorded_report_holds() -> None:
    rep = trace_render.report_of(analysis.analyze_file(FALLBACK, m=matrix.load()))
    recorded = Report.from_json(sample()).trace
    assert rep.trace is not None and recorded is not None
    assert rep.trace.summary == recorded.summary and rep.trace.steps == recorded.steps
    assert dataclasses.replace(rep.trace.trace, file=recorded.trace.file) == recorded.trace
    assert rep.trace == TraceSection.from_json(json.loads(render_json(rep)))


def test_an_annotated_trace_holds_the_file_written_and_its_event_count(tmp_path: Path) -> None:
    out = tmp_path / "annotated.json"
    rep = analysis.trace_report(FALLBACK, annotate=out, m=matrix.load())
    assert rep.trace is not None and rep.trace.trace.annotated is not None
    ann = rep.trace.trace.annotated
    assert ann.file == str(out) and ann.instant_events == sum(
        1 for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "kernelcheck")
    data = json.loads(render_json(rep))
    assert list(data["trace"])[-1] == "annotated" and data["trace"]["annotated"]["instant_events"] == ann.instant_events
    back = Report.from_json(data).trace
    assert back is not None and back.trace.annotated == Annotated(str(out), ann.instant_events)


def test_the_step_table_shows_the_least_busy_steps_of_many_by_their_fields() -> None:
    rep = Report.from_json(sample())
    sec = rep.trace
    assert sec is not None
    one = sec.steps[0]
    busy = {0: 0.95, 1: 0.95, 10: 0.95, 11: 0.95, 6: 0.1}  # the ends always shown; step 6 the least busy
    steps = [dataclasses.replace(one, name=f"ProfilerStep#{i}", gpu_busy_fraction=busy.get(i, 0.9)) for i in range(12)]
    rep.trace = dataclasses.replace(sec, steps=steps)
    shown = [r.name for r in trace_render._steps_to_show(steps)]
    assert len(shown) == trace_render.MAX_STEP_ROWS and "ProfilerStep#6" in shown
    assert shown == [f"ProfilerStep#{i}" for i in (0, 1, 2, 3, 4, 6, 10, 11)]  # in order; ties: the earlier
    lines = trace_render.render_text(rep).splitlines()
    assert any(line.startswith("  ProfilerStep#6 ") for line in lines)
    assert "  ... 4 more steps not shown" in "\n".join(lines)  # wording: renderer test


def test_the_rows_cells_come_from_the_fields() -> None:
    row = Report.from_json(sample()).trace.summary  # type: ignore[union-attr]
    quiet = dataclasses.replace(row, kernels=0, gpu_busy_fraction=None, launch_delay_us=LaunchDelay(0.0, 0.0, 0.0, 0))
    cells = trace_render._row(quiet).split()
    assert cells[:2] == ["whole", "trace"] and cells[-3:] == ["-", "-", "-"]  # busy, gaps, delay: none to show
    assert trace_render._delay_lines(quiet) == []


def test_the_summary_lists_the_rows_plain_fields_in_the_json_order() -> None:
    rep = Report.from_json(sample())
    assert rep.trace is not None
    plain = rep.trace.summary.plain()
    keys = [k for k, _ in plain]
    json_keys = [k for k, v in sample()["summary"].items() if not isinstance(v, (dict, list))]
    assert keys == json_keys and "idle_gaps" not in keys and "top_kernels_by_time" not in keys
    text = report_text(rep).splitlines()
    at = text.index("summary")
    assert text[at + 1:at + 1 + len(plain)] == [f"  {k}: {v}" for k, v in plain]


def test_a_report_without_a_trace_section_is_not_rendered_as_one() -> None:
    with pytest.raises(ValueError, match="no trace section"):
        trace_render.render_text(Report("doctor", None, None, None))


def test_a_matched_signature_is_reported_with_its_steps_by_trace_and_without_them_by_verify_step() -> None:
    an = analysis.analyze_file(FALLBACK, m=matrix.load())
    recorded = Report.from_json(sample()).trace
    assert recorded is not None
    assert [m.reported() for m in an.fallbacks] == recorded.trace.fallback_signatures
    whole_step = an.fallbacks[0].reported(with_steps=False)  # verify/step_worker.py's, one training step
    assert whole_step.steps is None and list(whole_step.to_json()) == ["id", "package", "functions", "evidence"]
    assert FallbackSignature.from_json(whole_step.to_json()) == whole_step
