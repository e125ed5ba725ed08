"""Flags that do not apply, paths and sizes a run cannot use, and predictions that must agree with the real run:
exit 2 before anything runs, in process (no torch import on these paths).
"""

from __future__ import annotations

import os
import signal
import stat
import time

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core import signals
from kernelcheck.core.plan_step import Step, StepKind
from kernelcheck.core.status import Finding, FunctionStatus
from kernelcheck.install import command as install_command
from kernelcheck.install.plan_types import Plan
from kernelcheck.report.model import Report
from kernelcheck.report.step import Failed
from kernelcheck.verify import step as step_mod
from kernelcheck.verify import step_worker
from tests.environments import model_ref

MODEL = "qwen3.8-27b"


def _run(args: list[str]):
    t0 = time.monotonic()
    res = CliRunner().invoke(main, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    return res, time.monotonic() - t0


@pytest.mark.parametrize("args, flag, needs", [
    (["verify", "--model", MODEL, "--layers", "2"], "--layers", "--step"),
    (["verify", "--model", MODEL, "--no-checkpointing"], "--no-checkpointing", "--step"),
    (["verify", "--model", MODEL, "--checkpointing"], "--checkpointing", "--step"),
    (["verify", "--model", MODEL, "--trace-dir", "t"], "--trace-dir", "--step"),
    (["doctor", "--timeout", "5"], "--timeout", "--all-ranks"),
    (["verify", "--model", MODEL, "--timeout", "5"], "--timeout", "--all-ranks"),
])
def test_a_flag_without_the_flag_it_needs_is_bad_usage(args, flag, needs):
    res, took = _run(args)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"{flag} only applies with {needs}" in res.stderr  # wording: renderer test
    assert took < 5  # refused before any check ran


@pytest.mark.parametrize("extra, flag", [(["--step"], "--step"), (["--shape", "full"], "--shape full"),
                                         (["--tokens", "64"], "--tokens")])  # --benchmark: the payoff
def test_packing_refuses_the_flags_it_would_ignore(extra, flag):
    res, _ = _run(["verify", "--model", MODEL, "--packing", *extra])
    assert res.exit_code == 2 and f"{flag} does not apply with --packing" in res.stderr  # wording: renderer test


def test_step_refuses_benchmark():
    res, _ = _run(["verify", "--model", MODEL, "--step", "--benchmark"])
    assert res.exit_code == 2 and "--benchmark does not apply with --step" in res.stderr  # wording: renderer test


def test_an_unwritable_trace_dir_is_refused_before_the_step_runs(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    afile = tmp_path / "file"
    afile.write_text("x")
    cases = [tmp_path / "file" / "sub", afile]
    if os.geteuid() != 0:  # root writes through permission bits
        cases.append(ro / "traces")
    for bad in cases:
        res, took = _run(["verify", "--model", MODEL, "--step", "--trace-dir", str(bad)])
        assert res.exit_code == 2, res.output
        assert "--trace-dir" in res.stderr or "step traces" in res.stderr  # wording: renderer test
        assert took < 5


def test_tokens_past_the_context_are_refused_before_torch_is_imported():
    res, took = _run(["verify", "--model", MODEL, "--step", "--tokens", "10000000000"])
    assert res.exit_code == 2 and "max_position_embeddings 262,144" in res.stderr  # wording: renderer test
    assert took < 5


def test_tokens_whose_logits_do_not_fit_in_memory_are_refused(monkeypatch):
    class Cfg:
        vocab_size = 248320

    monkeypatch.setattr(step_mod, "_available_bytes", lambda: 8 << 30)
    with pytest.raises(step_mod.BadInput, match="need 14.8 GiB"):
        step_mod._check_memory(Cfg(), 8000, "tiny")
    step_mod._check_memory(Cfg(), 1000, "tiny")  # 1.9 GiB: fits


def test_out_of_memory_is_a_limit_of_the_check_never_broken():
    assert step_worker.out_of_memory(MemoryError())
    assert step_worker.out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:121] DefaultCPUAllocator: "
                                                  "can't allocate memory: you tried to allocate 80000000000 bytes"))
    assert not step_worker.out_of_memory(RuntimeError("shape mismatch"))
    fast = {"path": "fast", "error": "RuntimeError: ... can't allocate memory", "out_of_memory": True}
    ref = {"path": "reference", "error": "the worker process was killed by SIGKILL", "out_of_memory": True}
    found = step_mod._findings(fast, ref, 262144, Failed(fast["error"]))
    assert [(f.id, f.severity) for f in found] == [("verify-step-out-of-memory", "fallback")]
    rep = Report("verify", {}, None, "train", [], found)
    assert rep.exit_code == 3  # never 4 (BROKEN), never 0 (the check did not run)


@pytest.mark.parametrize("code, sig", [(-signal.SIGINT, signal.SIGINT), (130, signal.SIGINT),
                                       (-signal.SIGTERM, signal.SIGTERM), (143, signal.SIGTERM)])
def test_an_interrupted_step_worker_stops_the_check(code, sig):
    with pytest.raises(step_mod.Interrupted) as got:
        step_mod._stop_if_interrupted(code)
    assert got.value.signum == sig
    for ok in (0, 1, -signal.SIGKILL):
        step_mod._stop_if_interrupted(ok)


def test_sigint_started_ignored_is_still_acted_on():
    """A script's `kernelcheck ... &` starts with SIGINT ignored; `kill -INT` must still stop it (item 8)."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), signals.routed():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # restored after the command
    finally:
        signal.signal(signal.SIGINT, old)


def test_an_ignored_sigterm_stays_ignored():
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with signals.routed():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, old)


def _fn(name: str, package: str, status: str, used: bool = True) -> FunctionStatus:
    return FunctionStatus(name, package, status, f"x.{name}", used=used)


def test_a_dry_run_predicts_the_packages_it_leaves_alone():
    """`install --package fla-core` on a GPU image: causal-conv1d stays absent, so the doctor after the install
    says FALLBACK (exit 3); the dry run must predict the same, not READY (item 9)."""
    before = Report("doctor", None, model_ref(MODEL), "train", [
        _fn("chunk_gated_delta_rule", "fla-core", "fallback"),
        _fn("causal_conv1d_fn", "causal-conv1d", "fallback"),
        _fn("causal_conv1d_update", "causal-conv1d", "fallback", used=False),
        _fn("attention:sdpa", "torch", "fast")], [])
    plan = Plan((Step("fla-core", "install", "wheelhouse", "fla-core==0.6.0", "a wheel for this torch",
                      kind=StepKind.WHEELHOUSE_WHEEL),),
                None, False)  # type: ignore[arg-type]
    assert plan.predicted == "ready"  # what the dry run said before
    report = Report("install", None, before.model, "train")
    outcome = install_command._finish_plan(report, plan, executed=False, before=before)
    report, code = outcome.report, outcome.exit_code
    assert code == 3 and report.prediction is not None and report.prediction.predicted == "fallback"
    (left,) = [f for f in report.findings if f.id == "install-leaves-package"]
    assert left.functions == ("causal_conv1d_fn",) and left.severity == "fallback"
    # the whole model's install leaves nothing alone: READY as before
    full = Plan(plan.steps + (Step("causal-conv1d", "install", "wheelhouse", "causal-conv1d==1.7.0", "ok",
                                      kind=StepKind.WHEELHOUSE_WHEEL),),
                None, False)  # type: ignore[arg-type]
    outcome2 = install_command._finish_plan(Report("install", None, before.model, "train"), full, False, before)
    report2, code2 = outcome2.report, outcome2.exit_code
    assert code2 == 0 and not [f for f in report2.findings if isinstance(f, Finding) and f.id.startswith("install-l")]
