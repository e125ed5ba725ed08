"""core/signals.held: a SIGINT/SIGTERM that lands in a held block is never lost."""

from __future__ import annotations

import json as _json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kernelcheck.core import signals
from kernelcheck.core.errors import Interrupted
from tests.envs import REPO
from tests.integration.test_install_signals import MARK, _alive_with  # the /proc scan for what is left of a run


@pytest.fixture(autouse=True)
def _sigint_as_a_terminal_gives_it():
    """SIGINT as Python sets it in a foreground process: a shell starts a background job with SIGINT ignored, and
    held() rightly keeps an ignored signal ignored (what these tests hold is the signal a user sends)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_a_held_block_is_raised_when_it_ends(sig):
    with pytest.raises(Interrupted) as got, signals.held():
        os.kill(os.getpid(), sig)
    assert got.value.signum == sig


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_not_swallowed_by_an_import_that_fails_in_the_same_block(sig):
    # the install's probe of a broken fla-core (einops missing): the import fails while the signal is held
    with pytest.raises(Interrupted) as got, signals.held(second_interrupts=True):
        os.kill(os.getpid(), sig)
        raise ModuleNotFoundError("No module named 'einops'")
    assert got.value.signum == sig
    assert isinstance(got.value.__context__, ModuleNotFoundError)


def test_without_reraise_the_caller_gets_the_list_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    with signals.held(reraise=False) as came:
        os.kill(os.getpid(), signal.SIGTERM)
    assert came == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is before


# -- randomized interrupts of real commands (integration lane) ----------------------------------------------
#
# SIGINT (to the process group, as Ctrl-C) or SIGTERM (to the process, as `kill`) at a random moment into
# `install` (--target a temp folder, a local wheelhouse), `verify --step` (CPU, tiny), `trace` (a generated
# 200 MB trace) and `padding` (a generated 155 MB lengths file). Half the runs start with SIGINT ignored, as a
# script's `cmd &` starts them (the case where kill -INT used to be lost). Every run must exit 130/143 with
# the one-line message and no traceback, and leave nothing: TMPDIR empty, the --target folder as it was, no
# process of the run alive. The moments come from a seeded generator: KC_INTERRUPT_SEED=N reproduces a run
# (the seed is in every failure message). On this CPU machine the install stops before pip (its plan refuses
# fla-core for a CPU torch): the signals during pip and a build are test_install_signals.py's (CUDA torch venv).

SEED = int(os.environ.get("KC_INTERRUPT_SEED") or time.time_ns() % 100_000)
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _write_trace(path: Path, events: int) -> None:
    """A CPU-profiler-shaped trace: ProfilerStep ranges of 2,000 cpu_ops each."""
    with open(path, "w") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        ts, step, n, sep = 0.0, 0, 0, ""
        while n < events:
            out.write(sep + _json.dumps({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                                         "pid": 1, "tid": 1, "ts": ts, "dur": 20000.0}))
            sep = ",\n"
            out.write("".join(",\n" + _json.dumps({"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 50}",
                                                   "pid": 1, "tid": 1, "ts": ts + k * 10, "dur": 6,
                                                   "args": {"External id": n + k}}) for k in range(2000)))
            n, ts, step = n + 2001, ts + 20100.0, step + 1
        out.write("\n]}\n")


def _one(args: list[str], sig: signal.Signals, at: float, ignored: bool, tmp: Path) -> tuple[int, str, float]:
    """Run kernelcheck ARGS, send `sig` `at` seconds in; (exit code, stderr, seconds it took to stop); -1 when
    it ended before the signal."""
    token = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELCHECK_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TMPDIR=str(tmp), OMP_NUM_THREADS="1", **{MARK: token})

    def start() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    err = tmp.parent / f"{token}.err"
    with open(err, "w") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", *args], stdout=subprocess.DEVNULL, stderr=fe,
                                env=env, cwd=str(tmp.parent), start_new_session=True, preexec_fn=start)
    try:
        time.sleep(at)
        if proc.poll() is not None:
            return -1, err.read_text(), 0.0
        sent = time.monotonic()
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
        left = _alive_with(token)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert left == [], f"seed {SEED}: {args[0]} left processes running: {left}"
    return code, err.read_text(), took


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_"))


CASES = [("trace", 6, (0.8, 4.0)), ("padding", 5, (0.6, 2.5)), ("install", 3, (0.4, 1.4)),
         ("verify-step", 3, (1.5, 5.0))]  # on 2 cores: this install about 1.7-2.5 s, verify --step about 7 s
