"""kernelcheck.ray's decisions in-process: the environment fingerprint (what makes two workers' environments one),
the node-local cache and its lock (N workers, one check), the error a failed worker carries (verdict, fix, record)
and the driver's fleet from the workers' records. A real Ray cluster runs it in
tests/integration/test_ray_gate.py."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import kernelcheck.ray as kray
from kernelcheck.core.errors import GateFailed
from kernelcheck.core.status import EXIT_BROKEN, EXIT_FALLBACK, EXIT_INTERNAL, EXIT_USAGE
from kernelcheck.fleet import summary
from kernelcheck.fleet.gather import DIED, NEVER_JOINED

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
ENV = {"PATH": "/usr/bin", "FLA_USE_TMA": "0", "HOME": "/root"}


def _report(name: str = "doctor_train.json") -> dict[str, Any]:
    return dict(json.loads((REPORTS / name).read_text()))


def _verdict(report: dict[str, Any]) -> kray.GateVerdict:
    rec = summary.summarise(report, host="node7")
    return kray.GateVerdict(rec.exit_code, rec.to_json(), kray._lines(report), time.time(), 1.5, 4242)


def test_importing_the_hook_imports_no_ray() -> None:
    assert "kernelcheck.ray" in sys.modules and "ray" not in sys.modules  # this venv has no ray at all


def test_one_environment_one_fingerprint_and_what_changes_it(tmp_path: Path) -> None:
    key = kray.fingerprint("qwen3.8-27b", "train", ENV)
    assert key == kray.fingerprint("qwen3.8-27b", "train", dict(ENV))
    # Ray gives each GPU actor its own CUDA_VISIBLE_DEVICES; unrelated variables do not count either
    assert key == kray.fingerprint("qwen3.8-27b", "train", ENV | {"CUDA_VISIBLE_DEVICES": "3", "RAY_JOB": "x"})
    assert key != kray.fingerprint("qwen3.8-27b", "train", ENV | {"FLA_USE_TMA": "1"})
    assert key != kray.fingerprint("qwen3.8-27b", "train", ENV | {"PYTHONPATH": "/opt/other-site"})
    assert key != kray.fingerprint("qwen3.8-27b", "infer", ENV)
    assert key != kray.fingerprint("lfm2-1.2b", "train", ENV)
    assert key != kray.fingerprint("qwen3.8-27b", "train", ENV, python="/opt/venv2/bin/python")
    site = tmp_path / "site"
    (site / "fla_core-0.6.0.dist-info").mkdir(parents=True)
    (site / "fla_core-0.6.0.dist-info" / "METADATA").write_text("Name: fla-core\nVersion: 0.6.0\n")
    base = kray.fingerprint("qwen3.8-27b", "train", ENV, path=sys.path)
    assert base != kray.fingerprint("qwen3.8-27b", "train", ENV, path=[str(site), *sys.path])


def test_workers_starting_together_pay_one_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []

    def run_check(model: str, mode: str, timeout: float, environ: Any, python: str) -> kray.GateVerdict:
        runs.append(1)
        time.sleep(0.3)  # the others arrive while it runs: they wait on the lock, then read its verdict
        return _verdict(_report())

    monkeypatch.setattr(kray, "run_check", run_check)
    got: list[kray.GateVerdict] = []
    threads = [threading.Thread(target=lambda: got.append(kray.check("qwen3.8-27b", "train", environ=ENV,
                                                                     folder=tmp_path))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(runs) == 1 and len(got) == 6
    assert sorted(v.cached for v in got) == [False] + [True] * 5
    assert {v.exit_code for v in got} == {EXIT_FALLBACK} and {v.checked_by for v in got} == {4242}
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_an_internal_error_is_not_kept_and_an_old_verdict_is_checked_again(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    codes = [EXIT_INTERNAL, EXIT_FALLBACK, EXIT_BROKEN]

    def run_check(*args: Any) -> kray.GateVerdict:
        v = _verdict(_report())
        return kray.GateVerdict(codes.pop(0), v.record, v.lines, time.time(), 0.1, 1)

    monkeypatch.setattr(kray, "run_check", run_check)
    assert kray.check("m", "train", environ=ENV, folder=tmp_path).exit_code == EXIT_INTERNAL
    assert kray.check("m", "train", environ=ENV, folder=tmp_path).exit_code == EXIT_FALLBACK  # checked again
    assert kray.check("m", "train", environ=ENV, folder=tmp_path).cached
    (entry,) = tmp_path.glob("*.json")
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps(data | {"checked_at": time.time() - kray.CACHE_SECONDS - 1}))
    assert kray.check("m", "train", environ=ENV, folder=tmp_path).exit_code == EXIT_BROKEN  # expired: checked again


def test_the_failed_workers_error_carries_the_verdict_the_fix_and_its_record() -> None:
    report = _report() | {"device": {"type": "cpu", "origin": "torch-build", "visible": True}}  # as doctor writes it
    message = kray.failure_message(_verdict(report), "qwen3.8-27b", "train")
    lines = message.splitlines()
    assert lines[0].startswith("kernelcheck gate stopped this Ray worker before actor code (host ")
    assert lines[1] == "verdict: FALLBACK: a slow torch path would run (exit 3) · device cpu"
    bad = [f for f in report["functions"] if f["status"] == "fallback" and f["used"]]
    assert f"  {bad[0]['name']} ({bad[0]['package']}): fallback: {bad[0]['reason']}" in lines
    assert f"    fix: {bad[0]['fix']}" in lines
    rec = kray.record_in("ActorDiedError: ...\n" + message + "\n\nThe actor never ran")
    assert rec is not None and rec.exit_code == EXIT_FALLBACK and rec.host is not None and " pid " in rec.host
    assert [f.name for f in rec.functions] == [f["name"] for f in report["functions"]]
    assert kray.record_in("a worker that died without a gate") is None


def test_a_gate_without_a_model_stops_the_worker_as_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(kray.MODEL_VARIABLE, raising=False)
    monkeypatch.delenv(kray.TIMEOUT_VARIABLE, raising=False)
    with pytest.raises(GateFailed) as err:
        kray.gate()
    assert err.value.exit_code == EXIT_USAGE and kray.MODEL_VARIABLE in err.value.message
    rec = kray.record_in(err.value.message)  # the driver's table shows it as that worker's error, exit 2
    assert rec is not None and rec.exit_code == EXIT_USAGE and rec.error is not None
    monkeypatch.setenv(kray.MODEL_VARIABLE, "qwen3.8-27b")
    for bad in ("soon", "0", "-5", "nan", "inf"):
        monkeypatch.setenv(kray.TIMEOUT_VARIABLE, bad)
        with pytest.raises(GateFailed) as err:
            kray.gate()
        assert err.value.exit_code == EXIT_USAGE and f"{kray.TIMEOUT_VARIABLE}={bad!r}" in err.value.message


def test_without_a_writable_cache_each_worker_checks_for_itself(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kray, "run_check", lambda *a: _verdict(_report()))
    blocker = tmp_path / "file"
    blocker.write_text("")
    got = kray.check("m", "train", environ=ENV, folder=blocker / "ray-gate")  # a path under a file: no folder
    assert got.exit_code == EXIT_FALLBACK and not got.cached


def test_the_driver_fleet_is_the_all_ranks_fleet_with_workers_as_ranks() -> None:
    train, infer = (summary.summarise(_report(n), host="node1") for n in ("doctor_train.json", "doctor_infer.json"))
    fleet = kray.records_of([(train, "node1 pid 10, Trainer", False), (infer, "node2 pid 11, Rollout", False),
                             (train, "node3 pid 12, Trainer", False), (None, "Trainer", True), (None, None, False)])
    data = fleet.to_json()
    assert data["schema"] == "kernelcheck.fleet/1" and data["launcher"] == "ray"
    assert fleet.exit_code == EXIT_BROKEN  # a worker without a record is missing: broken
    assert [(m["rank"], m["kind"]) for m in data["missing"]] == [(3, DIED), (4, NEVER_JOINED)]
    assert data["differences"][0]["ranks"] == ["rank 1 (node2 pid 11, Rollout)"]
    assert fleet.text.splitlines()[0] == "kernelcheck.ray.gather · 5 workers"
    events = fleet.blame("healthevent")["events"]
    assert [e["nodeName"] for e in events] == ["node1 pid 10, Trainer", "node2 pid 11, Rollout",
                                               "node3 pid 12, Trainer"]
