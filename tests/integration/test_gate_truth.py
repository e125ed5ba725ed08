"""The integration half of tests/unit/test_gate_truth.py: processes, pip or builds (the in-process tests
are there).

A gate never lies: bad --arch values, a forgotten --model, hub's own scope, closed pipes, --junit paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck.report.model import Report
from kernelcheck.report.text import render_text
from tests.unit.test_gate_truth import (  # helpers and fixtures of the in-process half
    REPO,
    _timed,
    invoke,
)


@pytest.mark.integration  # the real environment probe runs nvcc / nvidia-smi
def test_hub_accepts_the_same_arch_forms_as_doctor() -> None:
    code, out, err = invoke(["hub", "--arch", "sm_90", "--json"])
    assert code in (0, 3), err  # was exit 2: hub had its own MAJOR.MINOR-only parser
    assert json.loads(out)["environment"]["gpus"][0]["capability"] == "9.0"


@pytest.mark.integration  # the real environment probe runs nvcc / nvidia-smi
@pytest.mark.parametrize("arch", [[], ["--arch", "9.0"]], ids=["this-cpu-machine", "gpu-image"])
def test_a_gate_that_forgets_model_does_not_pass(arch: list[str]) -> None:
    code, out, _ = invoke(["doctor", *arch, "--json"])
    rep = json.loads(out)
    assert code == 3 and rep["verdict"] == "fallback" and rep["model"] is None
    (f,) = [f for f in rep["findings"] if f["id"] == "no-model"]
    assert "--model" in f["fix"]
    code, out, _ = invoke(["doctor", *arch])
    # what a person reads last: this report's verdict line (worded by report/text.py, tested there)
    assert code == 3 and out.splitlines()[-1] == render_text(Report.from_json(rep)).splitlines()[-1]


@pytest.mark.integration  # the real environment probe runs nvcc / nvidia-smi
def test_hub_is_not_ready_when_hub_kernels_are_not_used() -> None:
    # doctor says FALLBACK for these functions on this machine; hub must not say READY for them
    code, out, _ = invoke(["hub", "--model", "qwen3.8-27b", "--json"])
    rep = json.loads(out)
    assert rep["hub"]["used"] is False
    assert code == 3 and rep["verdict"] == "fallback"
    (f,) = [f for f in rep["findings"] if f["id"] == "hub-decides-nothing"]
    assert "kernelcheck doctor --model qwen3.8-27b" in f["fix"]


@pytest.mark.integration
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_closed_pipe_keeps_the_exit_code_and_prints_no_error(json_flag: list[str]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b", *json_flag],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything was written, as with `| true`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 3, err
    assert "BrokenPipe" not in err and "internal error" not in err


@pytest.fixture()
def silent_hub(tmp_path: Path):
    """A Hub endpoint that accepts connections and never answers, and an empty HF cache."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    try:
        yield {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{srv.getsockname()[1]}",
               "HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HOME": str(tmp_path / "home")}
    finally:
        srv.close()


@pytest.mark.integration
def test_hub_repo_with_a_silent_hub_is_bounded_and_not_ready(silent_hub: dict[str, str]) -> None:
    res, took = _timed(["hub", "--repo", "kernels-community/fla@v2"], silent_hub)
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-2000:]  # was READY (exit 0), or a hang
    assert took < 30, took  # was: no end (huggingface_hub's client waits forever by default)
    assert "waiting up to 1 s for the Kernel Hub listing" in res.stderr \
        and "HF_HUB_OFFLINE=1" in res.stderr  # wording: renderer test (models.bounded's progress line)
    assert "Retrying" not in res.stderr and "Traceback" not in res.stderr
    assert res.stdout.splitlines()[-1] == "verdict: FALLBACK: a slow torch path would run (exit 3)"
    js, took = _timed(["hub", "--repo", "kernels-community/fla@v2", "--json"], silent_hub)
    rep = json.loads(js.stdout)
    assert js.returncode == 3 and took < 30 and rep["verdict"] == "fallback", js.stderr[-2000:]
    (unresolved,) = [f for f in rep["findings"] if f["id"] == "hub-repo-unresolved"]  # the wait that ran out
    assert unresolved["severity"] == "fallback", unresolved


@pytest.mark.integration
@pytest.mark.parametrize("args", [
    ["hub", "--repo", "kernels-community/fla@v2", "--prefetch"],
    ["install", "--model", "qwen3.8-27b", "--source", "hub", "--arch", "9.0"],
], ids=["hub-prefetch", "install-source-hub"])
def test_a_failed_prefetch_is_fallback_not_broken(args: list[str], silent_hub: dict[str, str],
                                                  tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    wh.mkdir()
    extra = ["--wheelhouse", str(wh)] if args[0] == "install" else []
    res, took = _timed([*args, *extra, "--json"], silent_hub)
    rep = json.loads(res.stdout)
    assert res.returncode == 3 and rep["exit_code"] == 3 and rep["verdict"] == "fallback", res.stderr[-2000:]
    assert any(f["id"] == "hub-prefetch-failed" and f["severity"] == "fallback" for f in rep["findings"])
    assert took < 60 and "Traceback" not in res.stderr
