"""The library and the CLI are one house: for the same inputs, each command's library entry point and its CLI give
the same finding ids (both call commands/<command>.py `run`), and the verdict and exit code follow from the report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

import kernelcheck
from kernelcheck.cli.main import main

OFFLINE = {"HF_HUB_OFFLINE": "1"}


def cli_json(args: list[str]) -> dict[str, Any]:
    res = CliRunner().invoke(main, [*args, "--json"], env=OFFLINE, catch_exceptions=False)
    out: dict[str, Any] = json.loads(res.stdout)
    assert out["exit_code"] == res.exit_code
    return out


def ids(findings: list[Any]) -> list[str]:
    return [f["id"] if isinstance(f, dict) else f.id for f in findings]


@pytest.fixture(autouse=True)
def _same_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both paths see the same machine: the H200 image with this box's transformers, probed without a process."""
    from importlib.metadata import version

    from kernelcheck.core import environment
    from tests.environments import make_env

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(environment, "probe", lambda **_: make_env(transformers=version("transformers")))


def test_doctor_the_library_gets_the_cli_findings_cost_and_packing_included() -> None:
    lib = kernelcheck.check("qwen3.8-27b", "train", arch="9.0")
    cli = cli_json(["doctor", "--model", "qwen3.8-27b", "--mode", "train", "--arch", "9.0"])
    assert ids(lib.findings) == ids(cli["findings"])
    assert {"gpu-target", "packing", "fallback-cost"} <= set(ids(lib.findings))
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"])


def _static(model: str = "qwen3.8-27b", command: str = "verify") -> Any:
    """doctor/run.py's report alone (nothing a command adds), standing in for a run of the real layers."""
    from kernelcheck.doctor import run

    report = run.doctor(model, "train")
    report.command = command
    return report


def test_verify_the_library_gets_the_cli_findings_cost_included(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.verify import run

    monkeypatch.setattr(run, "verify", lambda model, **_: _static(model))
    lib = kernelcheck.verify_model("qwen3.8-27b")
    cli = cli_json(["verify", "--model", "qwen3.8-27b"])
    assert ids(lib.findings) == ids(cli["findings"])
    assert "fallback-cost" in ids(lib.findings)
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"])
