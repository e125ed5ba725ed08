"""A report's environment, model, packing and backends sections are typed values (report/sections.py): each reads
back from the JSON it wrote, byte for byte, and the renderers read their fields, not dict keys."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.core.capability import Capability
from kernelcheck.core.device import choose
from kernelcheck.core.environment import Gpu, PackageState, TorchInfo
from kernelcheck.core.status import FunctionStatus
from kernelcheck.doctor import backends as backends_mod
from kernelcheck.report import junit
from kernelcheck.report.model import Report, render_json
from kernelcheck.report.sections import (
    BackendsSection,
    EnvironmentView,
    ModelRef,
    ModeOutcome,
    PackingSection,
)
from kernelcheck.report.text import environment_lines, render_text
from tests.environments import make_env, make_view, model_ref

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "tests" / "data" / "reports"
# the reports of a model on a probed machine (trace probes nothing: no environment, no model; test_report_trace.py)
RECORDED = sorted(p for p in REPORTS.glob("*.json") if not p.stem.startswith("trace_"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_each_recorded_section_reads_back_typed_and_writes_the_same_json(path: Path) -> None:
    data = json.loads(path.read_text())
    env = EnvironmentView.from_json(data["environment"])
    assert env.to_json() == data["environment"]
    assert isinstance(env.torch, TorchInfo) and all(isinstance(p, PackageState) for p in env.packages.values())
    model = ModelRef.from_json(data["model"])
    assert model.to_json() == data["model"] and model.name == "Qwen/Qwen3.8-27B"
    if "packing" in data:
        packing = PackingSection.from_json(data["packing"])
        assert packing.to_json() == data["packing"]
        assert packing.outcome("position_ids").outcome == "mixed" and packing.declared is None
    rep = Report.from_json(data)
    assert isinstance(rep.environment, EnvironmentView) and isinstance(rep.model, ModelRef)


def test_the_view_of_a_probe_holds_its_values_and_writes_the_report_json_keys_in_order() -> None:
    env = make_env("10.0", gpu_name="B200", fla="0.6.0", env_vars={"FLA_TILELANG": "1"})
    view = EnvironmentView.of(env)
    assert view.gpus == (Gpu("B200", Capability(10, 0)),) and view.packages["fla"].version == "0.6.0"
    data = view.to_json()
    assert list(data) == ["python", "python_tag", "platform", "torch", "triton", "transformers", "kernels", "gpus",
                          "gpu_source", "driver", "nvcc", "nvcc_source", "nvcc_path", "cuda_home", "packages", "env"]
    assert data["gpus"] == [{"name": "B200", "capability": "10.0", "index": 0}] and data["env"] == {"FLA_TILELANG": "1"}
    assert data["torch"] == {"version": "2.11.0+cu130", "cuda": "13.0", "cxx11abi": True, "hip": None,
                             "cuda_available": True}
    assert EnvironmentView.from_json(data) == view
    jit = EnvironmentView.of(make_env(jit_nvcc="cuda-home-no-nvcc")).to_json()
    assert list(jit)[14] == "jit_nvcc_source" and EnvironmentView.from_json(jit).jit_nvcc_source == "cuda-home-no-nvcc"


def test_the_view_carries_the_probed_torch_and_its_import_error_stays_out_of_the_json() -> None:
    broken = TorchInfo("unimportable (SystemExit: no)", None, None, import_error="SystemExit: no")
    view = EnvironmentView.of(replace(make_env(), torch=broken))
    assert view.torch is broken  # one type: core/environment.TorchInfo, not a copy without import_error
    data = view.to_json()
    assert data["torch"] == {"version": "unimportable (SystemExit: no)", "cuda": None, "cxx11abi": None, "hip": None,
                             "cuda_available": False}
    back = EnvironmentView.from_json(data)
    assert back.torch == replace(broken, import_error=None) and back.to_json() == data


def test_a_report_without_an_environment_writes_an_empty_one_and_reads_it_back_as_none() -> None:
    rep = Report("trace", None, None, None)
    data = json.loads(render_json(rep))
    assert data["environment"] == {} and data["model"] is None
    back = Report.from_json(data)
    assert back.environment is None and back.model is None and render_json(back) == render_json(rep)
    assert "environment" not in render_text(back).splitlines()  # wording: renderer test


def test_a_report_recorded_before_nvcc_source_was_probed_reads_and_renders() -> None:
    recorded = REPO / "docs" / "measurements" / "2026-12-02-h200-doctor-7552758" / "doctor_train.json"
    data = json.loads(recorded.read_text())
    assert "nvcc_source" not in data["environment"]
    rep = Report.from_json(data)
    assert rep.environment is not None and rep.environment.nvcc_source == "none"
    assert rep.environment.gpus[0].capability == Capability(9, 0)
    assert "  GPUs: NVIDIA H200 (sm_90) · driver" in "\n".join(environment_lines(rep.environment))


def test_the_environment_text_reads_the_typed_fields() -> None:
    view = replace(make_view("12.0", gpu_name="RTX 5090", nvcc_source="pip"), kernels="0.19.1",
                   packages={"fla": PackageState("fla", True, "0.6.0", "fla-core", False, "boom"),
                             "mamba_ssm": PackageState("mamba_ssm", False, None, None, False, None)})
    lines = environment_lines(view)
    assert lines[1] == "  triton 3.6.0 · transformers 5.17.0 · kernels 0.19.1"
    assert lines[2] == ("  GPUs: RTX 5090 (sm_120) · driver 580.1 · nvcc 13.0 (pip's nvidia-cuda-nvcc, not a CUDA "
                        "toolkit) (/usr/local/cuda)")
    assert lines[3] == "  kernel packages: fla-core 0.6.0 (import fails)"
    no_torch = replace(view, torch=None, gpus=(), packages={})
    assert environment_lines(no_torch)[0] == "  python 3.12.3 · linux_x86_64 · torch not installed"
    assert len(environment_lines(no_torch)) == 3  # no packages probed: no packages line


def test_the_head_line_and_junit_read_the_model_fields() -> None:
    by_type = model_ref("qwen3_5", None, source="model_type")
    rep = Report("doctor", make_view(), by_type, "train")
    assert render_text(rep).splitlines()[0] == "kernelcheck doctor · qwen3_5 (qwen3_5, from model_type) · mode train"
    assert junit.model_label(rep) == "qwen3_5"
    rep.model = model_ref("./models/my.model/", "/abs/models/my.model", source="local")
    assert junit.model_label(rep) == "my_model"
    props = dict(junit.properties(rep))
    assert (props["model.id"], props["model.source"], props["gpus"], props["torch.cuda"]) == (
        "/abs/models/my.model", "local", "NVIDIA H200 (sm_90)", "13.0")
    bare = dict(junit.properties(Report("trace", None, None, None)))
    assert (bare["python"], bare["torch"], bare["gpus"], bare["nvcc"]) == ("", "absent", "none", "absent")


def test_the_model_ref_of_a_resolved_model_is_what_doctor_reports() -> None:
    from kernelcheck.integrations import transformers_models

    ref = ModelRef.of(transformers_models.resolve("qwen3.8-27b", m=matrix.load()))
    assert ref == model_ref()
    assert ModelRef.from_json(ref.to_json()) == ref


def _packing() -> PackingSection:
    return PackingSection("flash", True, {"chunk_gated_delta_rule": True, "causal_conv1d_fn": False},
                          (ModeOutcome("none", "correct", "one sequence per row", None),
                           ModeOutcome("flash", "raises", "causal_conv1d_fn is on the torch path", "install it")),
                          False, "ref")


def test_the_packing_section_reads_back_and_its_findings_come_from_its_fields() -> None:
    from kernelcheck.packing.findings import findings

    sec = _packing()
    data = sec.to_json()
    assert list(data) == ["declared", "guard_in_source", "functions", "modes", "cache_skips_packing", "reference"]
    assert data["modes"][1] == {"mode": "flash", "outcome": "raises", "reason": "causal_conv1d_fn is on the torch "
                                "path", "fix": "install it"}
    assert PackingSection.from_json(data) == sec
    got = {f.id: f for f in findings(sec)}
    assert got["packing-declared"].severity == "broken" and got["packing-declared"].fix == "install it"
    assert got["packing-none"].severity == "info" and "packing-needs-no-cache" not in got
    assert "packing-needs-no-cache" in {f.id for f in findings(replace(sec, cache_skips_packing=True))}


def test_the_backends_section_reads_back_byte_for_byte_in_a_report() -> None:
    env = make_env("9.0", fla="0.6.0", nvcc=None)
    fs = FunctionStatus("chunk_gated_delta_rule", "fla-core", "fast", "fla.ops...", None, None, "prefill")
    sec, _ = backends_mod.section(env, choose(env), [fs], "train", matrix.load())
    assert isinstance(sec, BackendsSection)
    data = sec.to_json()
    assert data["nvcc"] == {"version": None, "path": None, "source": "none", "is": "none"}
    assert [(o["pass"], o["backend_name"]) for o in data["ops"]] == [("forward", "Triton"), ("backward", "Triton")]
    assert BackendsSection.from_json(data) == sec
    pip = replace(sec, nvcc_source="pip").to_json()["nvcc"]
    assert pip["is"] == "pip's nvidia-cuda-nvcc (not a toolkit)"
    rep = Report("doctor", EnvironmentView.of(env), model_ref(), "train", [fs])
    rep.backends, rep.packing = sec, _packing()
    raw = render_json(rep)
    assert list(json.loads(raw))[-2:] == ["packing", "backends"]
    back = Report.from_json(json.loads(raw))
    assert back.backends == sec and back.packing == _packing() and render_json(back) == raw
