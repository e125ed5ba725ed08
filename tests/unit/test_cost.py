"""The cost of a FALLBACK in GPU-hours (doctor/cost.py) and `verify --step --record` (verify/record.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.doctor import cost
from kernelcheck.report.step import Failed, PathMeasured, PathProjection, StepSection
from kernelcheck.verify import record
from tests.environments import make_view, model_ref

M = matrix.load()

H200 = {"gpu": "NVIDIA H200", "torch": "2.11.0+cu130", "triton": "3.6.0", "transformers": "5.17.0"}


def test_the_shipped_qwen_measurement_gives_slowdown_and_gpu_hours_citing_its_command():
    m, distance = cost.choose(cost.measurements(m=M), "qwen3_5", H200)
    assert m is not None and distance == []
    f = cost.finding(m, distance, "qwen3.8-27b")
    assert f.id == "fallback-cost" and f.severity == "warning"
    ref, bound = m["reference_tokens_per_s"], m["bound_tokens_per_s"]
    extra = 1e9 / ref / 3600 - 1e9 / bound / 3600
    assert f"{extra:,.0f} extra GPU-hours per billion" in f.message  # wording: renderer test
    assert m["command"] in f.message and "same GPU and versions as here" in f.message  # wording: renderer test


def test_distance_names_what_differs_and_an_unknown_family_gets_the_command_to_measure():
    m, distance = cost.choose(cost.measurements(m=M), "qwen3_5", dict(H200, transformers="5.25.0", gpu=None))
    assert distance == ["transformers 5.17.0 there, 5.25.0 here"]
    m, distance = cost.choose(cost.measurements(m=M), "mamba2", H200)
    assert m is None
    f = cost.finding(None, [], "mamba2")
    assert f.id == "fallback-cost-unmeasured" and "--step --record" in (f.fix or "")


def test_a_teams_own_record_is_read_and_preferred_when_closer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    rec = tmp_path / "m.jsonl"
    mine = dict(H200, transformers="5.25.0", model_type="qwen3_5", date="2026-12-04", command="mine",
                bound_tokens_per_s=3000.0, reference_tokens_per_s=600.0)
    rec.write_text(json.dumps(mine) + "\n")  # a line that is not a measurement: tests/unit/test_hostile_readers.py
    monkeypatch.setenv("KERNELCHECK_MEASUREMENTS", str(rec))
    m, distance = cost.choose(cost.measurements(m=M), "qwen3_5", dict(H200, transformers="5.25.0"))
    assert m is not None and m["command"] == "mine" and distance == [] and m["recorded_in"] == str(rec)


_SAMPLE = StepSection.from_json(json.loads((Path(__file__).resolve().parents[1] / "data" / "reports"
                                            / "verify_step.json").read_text())["step"])
assert isinstance(_SAMPLE.fast, PathMeasured) and isinstance(_SAMPLE.reference, PathMeasured)
assert isinstance(_SAMPLE.projection.fast, PathProjection) and isinstance(_SAMPLE.projection.reference, PathProjection)
STEP = replace(_SAMPLE, tokens=8192, fast=replace(_SAMPLE.fast, step_ms=351.4, layers=["a", "a", "a", "f"]),
               reference=replace(_SAMPLE.reference, step_ms=954.6), projection=replace(
                   _SAMPLE.projection,
                   fast=replace(_SAMPLE.projection.fast, projected_tokens_per_s=2320.5, full_layers={"a": 48, "f": 16}),
                   reference=replace(_SAMPLE.projection.reference, projected_tokens_per_s=540.5)))
ENV = make_view(fla="0.6.0")  # an H200, torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0


def test_record_appends_one_line_doctor_can_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    m = record.measurement(STEP, ENV, model_ref(), "qwen3.8-27b")
    assert m is not None and m["layers"] == 4 and m["full_layers"] == 64 and m["bound_tokens_per_s"] == 2320.5
    assert (m["model_type"], m["model"], m["gpu"], m["capability"], m["torch"], m["packages"]) == (
        "qwen3_5", "Qwen/Qwen3.8-27B", "NVIDIA H200", "9.0", "2.11.0+cu130", {"fla": "0.6.0"})
    out = tmp_path / "rec.jsonl"

    class R:
        step, environment, model = STEP, ENV, model_ref()

    assert record.append(R(), str(out), "qwen3.8-27b") and record.append(R(), str(out), "qwen3.8-27b")
    assert len(out.read_text().splitlines()) == 2
    monkeypatch.setenv("KERNELCHECK_MEASUREMENTS", str(out))
    assert sum(1 for x in cost.measurements(m=M) if x.get("recorded_in")) == 2
    unprojected = replace(STEP, projection=replace(STEP.projection, fast=Failed("the path did not run")))
    assert record.measurement(unprojected, ENV, None, "q") is None


def test_record_path_is_checked_before_anything_runs(tmp_path: Path):
    for bad in (tmp_path, tmp_path / "no" / "x.jsonl"):
        with pytest.raises(BadInput):
            record.check_path(str(bad))
    record.check_path(str(tmp_path / "ok.jsonl"))


def test_the_shipped_cost_is_the_gpu_timeline_projection_of_one_committed_record() -> None:
    """The fallback cost doctor prints comes from one record's step.json: the per-layer costs from the GPU timeline
    (3.78x, what docs/verify.md reports for the same run), not the earlier CPU-range projection (4.29x) that
    made doctor say "about 4.3x" beside the README's 3.7x case."""
    import re
    import tarfile

    (row,) = [r for r in M.table("verified.toml")["measured"] if r["model_type"] == "qwen3_5" and "kind" not in r]
    record = re.search(r"measurement record (\S+), (\S+) (\S+)$", row["evidence"])
    assert record is not None, row["evidence"]
    folder = Path(__file__).resolve().parents[2] / "docs" / "measurements" / record[1]
    with tarfile.open(folder / record[2]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(record[3]))
        extracted = tar.extractfile(member)
        assert extracted is not None
        step = json.loads(extracted.read())
    step = step.get("step", step)
    proj = step["projection"]
    assert (row["bound_tokens_per_s"], row["reference_tokens_per_s"], row["tokens"]) == (
        proj["fast"]["projected_tokens_per_s"], proj["reference"]["projected_tokens_per_s"], step["tokens"])
    said = cost.finding(row, [], "qwen3.8-27b").message
    assert "about 3.8x slower (599 vs 2,262 tokens/s" in said and record[1] in said
    assert "3.78x" in (folder / "README.md").read_text()
