"""The integration half of tests/unit/test_signals.py: processes, pip or builds (the in-process tests
are there).

core/signals.held: a SIGINT/SIGTERM that lands in a held block is never lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import REPO
from tests.unit.test_signals import (  # helpers and fixtures of the in-process half
    CASES,
    EXIT,
    SEED,
    _leftovers,
    _one,
    _write_trace,
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("interrupt-inputs")
    _write_trace(d / "big.json", 1_500_000)  # ~200 MB: trace reads 40 MB in about 1.2 s now, 200 MB in ~6 s
    rng = random.Random(7)
    blocks = ["\n".join(str(rng.randint(1, 8192)) for _ in range(100_000)) + "\n" for _ in range(40)]
    with open(d / "lengths.txt", "w") as fh:
        for _ in range(8):  # 155 MB: the vectorized reader takes about 5 s on 2 cores (19 MB took 1 s)
            fh.writelines(blocks)
    wh = d / "wh"
    wh.mkdir()
    return {"trace": d / "big.json", "lengths": d / "lengths.txt", "wheelhouse": wh}


@pytest.mark.integration
@pytest.mark.parametrize("command, runs, window", CASES, ids=[c[0] for c in CASES])
def test_random_interrupts_exit_130_or_143_and_leave_nothing(command, runs, window, inputs, tmp_path):
    rng = random.Random(f"{SEED}-{command}")
    interrupted = 0
    for i in range(runs):
        sig = rng.choice((signal.SIGINT, signal.SIGTERM))
        at, ignored = rng.uniform(*window), rng.random() < 0.5
        tmp = tmp_path / f"run{i}" / "tmp"
        tmp.mkdir(parents=True)
        target = tmp_path / f"run{i}" / "site"
        args = {"trace": ["trace", str(inputs["trace"])], "padding": ["padding", str(inputs["lengths"])],
                "install": ["install", "--model", "qwen3.8-27b", "--package", "fla-core", "--offline",
                            "--wheelhouse", str(inputs["wheelhouse"]), "--target", str(target)],
                "verify-step": ["verify", "--model", "qwen3.8-27b", "--step"]}[command]
        code, err, took = _one(args, sig, at, ignored, tmp)
        what = f"seed {SEED}, {command} run {i}: {sig.name} at {at:.2f} s (SIGINT ignored at start: {ignored})"
        if code == -1:  # finished first: no interruption to judge, but nothing may be left either
            assert _leftovers(tmp) == [], f"{what}: left {_leftovers(tmp)}"
            continue
        interrupted += 1
        assert code == EXIT[sig], f"{what}: exit {code}\n{err[-2000:]}"
        assert f"interrupted by {sig.name}" in err \
            and "Traceback" not in err, f"{what}:\n{err[-2000:]}"  # wording: renderer test
        assert took < 30, f"{what}: took {took:.1f} s to stop"
        assert _leftovers(tmp) == [], f"{what}: left {_leftovers(tmp)} in TMPDIR"
        assert not target.exists() or not any(target.iterdir()), f"{what}: the --target folder was changed"
    assert interrupted >= (runs + 1) // 2, f"seed {SEED}: only {interrupted} of {runs} {command} runs were interrupted"


@pytest.mark.integration
def test_a_signal_as_the_verdict_is_printed_is_exit_130_or_the_verdict_never_a_kill_or_abort(tmp_path):
    """SIGINT sent the moment the verdict line appears lands in the command's last steps, click's cleanup or the
    interpreter's teardown: each must end as 130 (interrupted) or the verdict's own 3, never "Aborted!" (exit 1),
    a traceback, or death by the signal (exit -2, what a Ctrl-C in torch's teardown gave: cli/main.run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELCHECK_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    seen = []
    for i in range(6):
        err = tmp_path / f"{i}.err"
        with open(err, "w") as fe:
            proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b"],
                                    stdout=subprocess.PIPE, stderr=fe, env=env, text=True, start_new_session=True)
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("verdict"):
                    os.killpg(proc.pid, signal.SIGINT)
                    break
            proc.stdout.read()
            code = proc.wait(timeout=120)
        text = err.read_text()
        seen.append(code)
        assert code in (3, 130), f"run {i}: exit {code}\n{text[-2000:]}"
        assert "Traceback" not in text and "Aborted!" not in text, text[-2000:]
    assert seen  # six runs, each judged
