"""A step budget (`kernelcheck trace FILE --budget`, `verify --step --budget`) on the GPU traces the repository
holds: each profiled step's GPU time by op class matches a hand count of the same step (a plain loop over the
trace's events, the rules written out by hand) within 2% per class; the classes and gaps add up to the step's GPU
time; causes with a fix are named; floors, MFU and the step at the floors come from the model and the GPU's peaks;
a CPU trace says there is nothing to budget; the op-class table is data, checked when it is read."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from kernelcheck import schemas
from kernelcheck.budget import build, floors, render, table
from kernelcheck.budget import run as budget_run
from kernelcheck.cli.main import main
from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.integrations import transformers_models
from kernelcheck.report import budget as budget_text
from kernelcheck.verify import layers

DATA = Path(__file__).resolve().parents[1] / "data"
FAST = DATA / "gpu" / "step-fast.json.gz"  # a Qwen3.8-27B training step of 4 layers on an H200, kernels bound
REFERENCE = DATA / "gpu" / "step-reference.json.gz"  # the same step on the torch reference path
CPU = DATA / "step" / "cpu_tiny_step.json.gz"
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def _work(an: Any, query: str = "qwen3.8-27b", tokens: int = 8192) -> build.ModelWork:
    fields = layers.text_config(transformers_models.resolve(query, m=matrix.load()))[1]
    return budget_run.model_work(query, fields, tokens, True, an)


def _budget(path: Path, model: bool = True) -> dict[str, Any]:
    return budget_run.trace_budget(path, m=matrix.load(), work=_work if model else None)[1]


# the hand count: the step's events in a plain loop, each rule written out by hand (benchmarks/budget_handcount.py,
# which benchmarks/gpu/gpu_budget.sh runs on the step it records)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from budget_handcount import hand_count as _hand_count  # noqa: E402


@pytest.mark.parametrize("path", [FAST, REFERENCE], ids=["fast", "reference"])
def test_each_class_of_a_recorded_h200_step_matches_a_hand_count_within_two_percent(path: Path) -> None:
    # the reference path runs cuBLAS's batch_trsm_left_kernel (the torch GDN reference's triangular solve): GEMM
    b = _budget(path)
    name, gpu_ms, hand = _hand_count(path)
    st = max(b["steps"], key=lambda s: s["gpu_time_ms"])
    assert st["name"] == name and st["gpu_time_ms"] == pytest.approx(gpu_ms, rel=0.001)
    measured = {r["id"]: r["measured_ms"] for r in st["classes"]}
    for cid in {*measured, *hand} - {"unclassified"}:
        want, got = hand.get(cid, 0.0), measured.get(cid, 0.0)
        assert got == pytest.approx(want, rel=0.02, abs=0.05), (cid, got, want)
    assert st["unclassified"]["ms"] <= hand.get("unclassified", 0.0) + 0.05


def test_the_bound_step_is_where_the_time_goes_with_floors_mfu_and_causes() -> None:
    b = _budget(FAST)
    assert b["device"] == "NVIDIA H200" and b["peak"]["gpu"] == "H200 SXM"
    assert b["peak"]["reference"].startswith("https://www.nvidia.com/")
    st = max(b["steps"], key=lambda s: s["gpu_time_ms"])
    rows = {r["id"]: r for r in st["classes"]}
    # the budget's sum is the step's GPU time (within 2%; here exact to rounding); the classes cover >= 98%
    assert st["sum_ms"] == pytest.approx(st["gpu_time_ms"], rel=0.02)
    assert st["coverage"] >= 0.98
    assert rows["gemm"]["share"] > 0.5 and rows["gemm"]["floor_by"] == "compute"
    assert rows["gdn"]["measured_ms"] > 5 and rows["short_conv"]["measured_ms"] > 0.5
    for cid in ("gemm", "attention", "gdn", "short_conv", "norms", "elementwise", "loss", "optimizer"):
        assert rows[cid]["floor_ms"] is not None and 0 < rows[cid]["floor_ms"] <= rows[cid]["measured_ms"], cid
    assert rows["copies"]["floor_ms"] == 0.0 and rows["copies"]["gap_ms"] == rows["copies"]["measured_ms"]
    causes = {c["id"]: c for r in st["classes"] for c in r["causes"]}
    assert {"rmsnorm-unfused", "loss-fp32-logits", "sync-before-optimizer"} <= set(causes)
    assert "fla" in causes["rmsnorm-unfused"]["fix"] and causes["rmsnorm-unfused"]["reference"].endswith("48692")
    assert causes["sync-before-optimizer"]["reference"].endswith("48915")
    assert "torch-reference-gdn" not in causes  # fla's kernels ran: the reference-path cause does not apply
    mfu = st["mfu"]
    assert 0.2 < mfu["measured"] < 0.6 and 0.2 < mfu["projected_full"] < 0.6
    assert mfu["full_layers"] == {"full_attention": 16, "linear_attention": 48}
    assert 0 < st["step_ms_at_floors"] < st["gpu_time_ms"]


def test_the_torch_reference_step_names_the_missing_kernels_and_its_idle_gpu() -> None:
    st = max(_budget(REFERENCE)["steps"], key=lambda s: s["gpu_time_ms"])
    rows = {r["id"]: r for r in st["classes"]}
    causes = {c["id"] for r in st["classes"] for c in r["causes"]}
    assert {"torch-reference-gdn", "torch-reference-conv", "launch-gaps"} <= causes
    assert rows["idle"]["share"] > 0.2 and st["coverage"] >= 0.98
    assert st["sum_ms"] == pytest.approx(st["gpu_time_ms"], rel=0.02)
    fast = max(_budget(FAST)["steps"], key=lambda s: s["gpu_time_ms"])
    assert st["mfu"]["measured"] < fast["mfu"]["measured"] / 2


def test_the_budget_is_the_same_whether_the_reader_takes_its_fast_path_or_not(tmp_path: Path) -> None:
    """The same events written compactly (not torch's layout): the reader's JSON scanner path feeds the collector
    event by event; the budget is the same."""
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(json.loads(gzip.decompress(FAST.read_bytes()))))
    a, b = _budget(FAST), _budget(plain)
    assert [s["classes"] for s in a["steps"]] == [s["classes"] for s in b["steps"]]
    assert [s["gpu_time_ms"] for s in a["steps"]] == [s["gpu_time_ms"] for s in b["steps"]]


def test_a_cpu_trace_has_no_gpu_time_to_budget() -> None:
    b = _budget(CPU, model=False)
    assert b["steps"] == [] and b["steps_without_gpu_activity"]
    assert any("no GPU activity" in n for n in b["notes"])
    assert "<svg" in render.svg(b)


def test_without_a_model_the_measured_table_stands_and_floors_are_not_made_up() -> None:
    b = _budget(FAST, model=False)
    st = b["steps"][0] if b["steps"][0]["activities"] else b["steps"][1]
    rows = {r["id"]: r for r in st["classes"]}
    assert rows["gemm"]["floor_ms"] is None and rows["gemm"]["gap_ms"] is None and st["mfu"] is None
    assert st["step_ms_at_floors"] is None and any("no model given" in n for n in b["notes"])


def test_the_text_fits_100_columns_and_the_picture_is_one_svg_with_a_segment_per_class() -> None:
    b = _budget(FAST)
    lines = budget_text.text(b)
    assert max(map(len, lines)) <= 100
    assert any(line.strip().startswith("GEMM") for line in lines) and any("MFU" in line for line in lines)
    svg = ET.fromstring(render.svg(b, step=0))
    classes = {r.get("class") for r in svg.iter("{http://www.w3.org/2000/svg}rect")}
    assert {"gemm", "gdn", "norms", "idle"} <= classes


def test_the_cli_prints_the_budget_and_its_json_validates_against_the_budget_schema(tmp_path: Path) -> None:
    out_svg = tmp_path / "b.svg"
    args = ["trace", str(FAST), "--budget", "--model", "qwen3.8-27b", "--tokens", "8192", "--checkpointing"]
    res = CliRunner().invoke(main, [*args, "--json", "--budget-svg", str(out_svg)], env=OFFLINE)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    sec = data["budget"]
    assert sec["schema"] == "kernelcheck.budget/1"
    jsonschema.Draft202012Validator(schemas.load("budget")).validate(sec)
    assert sec["paths"]["trace"]["model"]["tokens"] == 8192 and out_svg.read_text().startswith("<svg")
    text = CliRunner().invoke(main, args, env=OFFLINE)
    assert "GDN / linear-attention core" in text.output and "fix:" in text.output
    budget_part = text.output[text.output.index("step budget of"):]
    assert max(map(len, budget_part.splitlines())) <= 100


@pytest.mark.parametrize("args", [["--model", "qwen3.8-27b"], ["--budget", "--model", "qwen3.8-27b"],
                                  ["--budget", "--model", "qwen3.8-27b", "--tokens", "0"],
                                  ["--budget-svg", "x.svg"]])
def test_budget_options_out_of_place_are_bad_usage(args: list[str]) -> None:
    res = CliRunner().invoke(main, ["trace", str(FAST), *args], env=OFFLINE)
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_verify_budget_without_step_is_bad_usage() -> None:
    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--budget"], env=OFFLINE)
    assert res.exit_code == 2 and "--step" in res.output


# --- the table is data ----------------------------------------------------------------------------------------------

def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    shutil.copytree(matrix.load().root, root, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return root


def _table(root: Path) -> table.OpTable:
    matrix._load_matrix.cache_clear()
    try:
        return table.load(matrix._load_matrix(root))
    finally:
        matrix._load_matrix.cache_clear()


def test_a_new_kernel_name_is_a_line_of_the_table_not_code(tmp_path: Path) -> None:
    shipped = table.Classifier(table.load(matrix.load()))
    name = "my_team_fused_swiglu_fwd_kernel"
    assert shipped.of_kernel(name) is None  # unclassified: listed by name in the budget, never dropped
    root = _copy(tmp_path)
    with (root / "op_classes.toml").open("a") as fh:
        fh.write("\n[[rule]]\nclass = \"elementwise\"\nkernel = 'fused_swiglu'\n"
                 "reference = \"https://github.com/linkedin/Liger-Kernel\"\n")
    assert table.Classifier(_table(root)).of_kernel(name) == "elementwise"


@pytest.mark.parametrize(("old", "new", "key"), [
    ('class = "gemm"\nkernel', 'class = "matmul"\nkernel', "class"),
    ("kernel = '^nvjet_", "kernel = '(^nvjet_", "kernel"),
    ('[[class]]\nid = "idle"', '[[class]]\nid = "waiting"', "class"),
    ('floor = "compute"', 'floor = "fast"', "floor"),
    ('bf16_tflops = 989.5', 'bf16_tflops = "989"', "bf16_tflops"),
])
def test_a_bad_table_is_bad_input_naming_the_key(tmp_path: Path, old: str, new: str, key: str) -> None:
    root = _copy(tmp_path)
    name = "gpus.toml" if "tflops" in old else "op_classes.toml"
    text = (root / name).read_text()
    assert old in text
    (root / name).write_text(text.replace(old, new, 1))
    with pytest.raises(BadInput) as exc:
        _table(root)
    assert name in str(exc.value) and key in str(exc.value)


def test_every_rule_and_cause_and_peak_cites_a_reference_a_user_can_open() -> None:
    t = table.load(matrix.load())
    assert all(r.reference.startswith("https://") for r in t.rules)
    assert all(c.reference.startswith("https://") and c.fix for c in t.causes)
    assert {p.gpu for p in t.peaks} >= {"H100 SXM", "H100 PCIe", "H200 SXM", "A100 SXM 80GB", "B200"}
    assert all(p.reference.startswith("https://www.nvidia.com/") for p in t.peaks)
    assert t.peak_for("NVIDIA H100 80GB HBM3") .gpu == "H100 SXM"  # type: ignore[union-attr]
    assert t.peak_for("NVIDIA H100 PCIe").gpu == "H100 PCIe"  # type: ignore[union-attr]
    assert t.peak_for("NVIDIA A100-SXM4-80GB").gpu == "A100 SXM 80GB"  # type: ignore[union-attr]
    assert t.peak_for("NVIDIA H200 NVL").gpu == "H200 NVL"  # type: ignore[union-attr]
    assert t.peak_for("Tesla T4") is None


def test_the_27b_weights_counted_from_the_config_are_the_models_size() -> None:
    fields = layers.text_config(transformers_models.resolve("qwen3.8-27b", m=matrix.load()))[1]
    shape = floors.shape_of(fields)
    full = floors.full_layers(shape)
    assert full == Counter({"linear_attention": 48, "full_attention": 16})
    assert 25e9 < shape.parameters(full) < 29e9


def test_the_recorded_gdn_layer_steps_are_all_classified_and_the_fallback_one_idles() -> None:
    """One Qwen3.8-27B GDN layer's forward on the H200 (tests/data/gpu/gdn_*.json.gz, no kernelcheck ranges):
    with the kernels, fla's and causal-conv1d's classes; without, their torch code counts by its kernels' names
    (GEMM, element-wise: the trace's fallback finding names the package) and the GPU idles half the step."""
    fast = _budget(DATA / "gpu" / "gdn_fast.json.gz", model=False)["steps"][0]
    slow = _budget(DATA / "gpu" / "gdn_fallback.json.gz", model=False)["steps"][0]
    for st in (fast, slow):
        assert st["coverage"] >= 0.98 and st["sum_ms"] == pytest.approx(st["gpu_time_ms"], rel=0.02)
    rows_f = {r["id"]: r for r in fast["classes"]}
    rows_s = {r["id"]: r for r in slow["classes"]}
    assert rows_f["gdn"]["measured_ms"] > 0.5 and rows_f["short_conv"]["measured_ms"] > 0
    assert rows_s["gdn"]["measured_ms"] == 0 and rows_s["idle"]["share"] > 0.4
    assert "launch-gaps" in {c["id"] for c in rows_s["idle"]["causes"]}
