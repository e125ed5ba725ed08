"""`install --dry-run` for another machine reads right: run lines that work where they are run (specs and the
wheelhouse, never this machine's temporary cp311 wheels), "no network" in words instead of the HTTP library's text,
and plan numbers aligned from 10 on. The progress line per step is in tests/unit/test_first_hour.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from kernelcheck.core.plan_step import Step, StepKind
from kernelcheck.install import dry_commands, networds
from kernelcheck.install.plan_types import Options, Plan, pip_cmd
from kernelcheck.report.text import _render_plan

TMP = Path("/tmp/kernelcheck-dry-run-abc")
WH = Path("/wheels")


def _step(name: str, artifact: str, action: str = "install") -> Step:
    spec = f"{name}==1.0"
    return Step(name, action, "pypi", spec, "why", pip_cmd(artifact, Options()), artifact=artifact,
                kind=StepKind.NEWEST_COMPATIBLE)


def _plan(*steps: Step) -> Plan:
    return Plan(steps, None, False)  # type: ignore[arg-type]  # the fit is not read here


def test_a_target_plan_names_specs_and_the_wheelhouse_not_this_machines_temporary_wheels() -> None:
    tmp_wheel = f"{TMP}/ml_dtypes-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    index_wheel = "/opt/pypi/files/psutil-1.0-cp36-abi3-manylinux_2_28_x86_64.whl"
    plan = dry_commands.portable(_plan(_step("ml-dtypes", tmp_wheel), _step("psutil", index_wheel)), TMP, WH, True)
    for step in plan.steps:
        assert step.command.endswith(f"--find-links {WH} {step.spec}"), step.command
        assert "cp311" not in step.command and str(TMP) not in step.command


def test_a_dry_run_here_names_the_spec_of_a_downloaded_wheel_and_keeps_a_wheelhouse_path() -> None:
    kept = f"{WH}/fla_core-1.0-py3-none-any.whl"
    plan = dry_commands.portable(_plan(_step("einops", f"{TMP}/einops-1.0-py3-none-any.whl"),
                                       _step("fla-core", kept)), TMP, WH, False)
    assert plan.steps[0].command.endswith(" einops==1.0") and str(TMP) not in plan.steps[0].command
    assert plan.steps[1].command.endswith(kept)


@pytest.mark.parametrize(("exc", "said"), [
    (requests.exceptions.ConnectionError(
        "HTTPSConnectionPool(host='github.com', port=443): Max retries exceeded with url: /x (Caused by "
        "NameResolutionError(\"Failed to resolve 'github.com' ([Errno -2] Name or service not known)\"))"),
     "no network: github.com could not be looked up"),
    (requests.exceptions.ConnectionError(
        "HTTPSConnectionPool(host='github.com', port=443): Max retries exceeded (Caused by NewConnectionError("
        "'Failed to establish a new connection: [Errno 101] Network is unreachable'))"),
     "no network: could not connect to github.com"),
    (requests.exceptions.ConnectTimeout("HTTPSConnectionPool(host='github.com', port=443): timed out"),
     "github.com did not answer within 15 s"),
])
def test_a_release_server_out_of_reach_is_said_in_words(exc: Exception, said: str) -> None:
    text = networds.unreachable("https://github.com/org/repo/releases/download/v1/x.whl", exc, 15)
    assert said in text  # wording: the one test of these words
    assert "HTTPSConnectionPool" not in text and "Max retries" not in text  # wording: renderer test


def test_plan_numbers_align_from_ten_on() -> None:
    steps = [_step(f"pkg{i}", f"{WH}/pkg{i}-1.0-py3-none-any.whl") for i in range(11)]
    lines = _render_plan(steps)
    heads = [ln for ln in lines if ln.lstrip()[:1].isdigit()]
    assert heads[8].index("install") == heads[9].index("install") == heads[10].index("install")
    whys = [ln for ln in lines if ln.lstrip().startswith("why:")]
    assert len({ln.index("why:") for ln in whys}) == 1
