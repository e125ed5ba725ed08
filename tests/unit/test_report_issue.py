"""`kernelcheck doctor --report-issue`: the markdown block a user pastes into a bug report (report/issue.py).

The block is rendered from a report of the H200 image as the probe describes it (tests/environments.py) and this
machine's own system facts; the real doctor run that prints it is in
tests/integration/test_first_hour_integration.py."""

from __future__ import annotations

from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core.status import Finding, FunctionStatus
from kernelcheck.report import issue
from kernelcheck.report.model import Report
from kernelcheck.report.sections import EnvironmentView
from tests.environments import make_env, model_ref


def _h200_report() -> Report:
    env = make_env(fla="0.6.0")
    rep = Report("doctor", EnvironmentView.of(env), model_ref(), "train")
    rep.functions = [FunctionStatus("chunk_gated_delta_rule", "fla-core", "broken", "fla.ops.chunk_gated_delta_rule"),
                     FunctionStatus("causal_conv1d_update", "causal-conv1d", "fallback", "torch", used=False)]
    rep.findings = [Finding("fla-640-refuses", "broken", "fla#640 | on Hopper")]
    return rep


def test_the_block_holds_versions_system_packages_functions_findings_and_the_verdict():
    sysinfo = {"kernelcheck": "0.1.0, commit abcdef123456 (checkout), matrix data of 2026-12-03", "os": "Linux-6",
               "glibc": "2.39", "cudnn": "9.10.2 (91002)", "nccl": "2.27.3", "huggingface_hub": "1.2.0"}
    text = issue.render(_h200_report(), sysinfo, ["doctor", "--model", "qwen3.8-27b", "--report-issue"])
    lines = text.splitlines()
    assert lines[0].startswith("<details") and lines[-1] == "</details>"
    rows = {ln.split(" | ")[0].lstrip("| "): ln.split(" | ")[1].removesuffix(" |") for ln in lines
            if ln.count(" | ") == 1}
    assert rows["verdict"] == "**BROKEN** (exit 4)"
    assert rows["torch"] == "2.11.0+cu130 (CUDA 13.0, cxx11abi True)"
    assert (rows["cuDNN"], rows["NCCL"], rows["glibc"], rows["driver"]) == ("9.10.2 (91002)", "2.27.3", "2.39",
                                                                            "580.1")
    assert rows["GPUs"] == "NVIDIA H200 (sm_90)" and rows["triton"] == "3.6.0" and rows["nvcc"] == "13.0"
    assert rows["kernelcheck"].startswith("0.1.0, commit abcdef123456")
    assert rows["command"] == "`kernelcheck doctor --model qwen3.8-27b --report-issue`"
    assert "| fla-core | 0.6.0 | yes |  |" in lines  # wording: renderer test
    assert "| chunk_gated_delta_rule | broken | fla.ops.chunk_gated_delta_rule |" in lines  # wording: renderer test
    assert "| causal_conv1d_update | fallback (not used) | torch |" in lines  # wording: renderer test
    assert "Findings: `fla-640-refuses` (broken)" in lines  # wording: renderer test


def test_system_facts_of_this_machine_are_read_without_failing():
    got = issue.system()
    assert set(got) >= {"os", "glibc", "cudnn", "nccl", "kernelcheck", "huggingface_hub"}
    assert got["nccl"] == "none"  # this machine's torch is a CPU build


def test_report_issue_with_json_is_bad_usage_at_once():
    res = CliRunner().invoke(main, ["doctor", "--model", "qwen3.8-27b", "--report-issue", "--json"])
    assert res.exit_code == 2 and "--report-issue" in res.stderr \
        and "Traceback" not in res.stderr  # wording: renderer test (exit-2 message)
