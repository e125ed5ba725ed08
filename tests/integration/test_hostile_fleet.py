"""A rank whose own usage is bad (a mistyped --model, found before its check runs) still joins the fleet and is
reported as bad input (exit 2) in rank 0's table, not as "never joined" (4) after the timeout. Two real ranks on
one rendezvous (the srun layout: RANK, WORLD_SIZE, MASTER_ADDR/PORT)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.envs import REPO

pytestmark = pytest.mark.integration


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_ranks_usage_error_is_bad_input_in_the_fleet_table() -> None:
    port = _port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELCHECK_", "RANK", "WORLD_SIZE", "MASTER_"))}
    procs = []
    for rank, model in ((0, "qwen3.8-27b"), (1, "qwen3.8-27bx")):
        env = base | {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "RANK": str(rank),
                      "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, "-m", "kernelcheck", "doctor", "--model", model, "--all-ranks",
                                       "--json", "--timeout", "60"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=240) for p in procs]
    fleet = json.loads(outs[0][0])
    by_rank = {r["rank"]: r for r in fleet["ranks"]}
    assert by_rank[1]["exit_code"] == 2, fleet  # was: rank 1 never joined (4) after the 60 s timeout
    assert "qwen3.8-27bx" in json.dumps(by_rank[1])
    assert procs[1].returncode == procs[0].returncode == fleet["exit_code"]


def test_a_rendezvous_that_accepts_and_never_answers_is_bounded_by_timeout() -> None:
    """A wrong port hitting another service, or a stuck rank 0: torch's TCPStore client waited 650 s until killed."""
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELCHECK_", "RANK", "WORLD_SIZE", "MASTER_"))}
    env = base | {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
                  "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(server.getsockname()[1])}
    t = time.monotonic()
    try:
        res = subprocess.run([sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b", "--all-ranks",
                              "--timeout", "5"], env=env, capture_output=True, text=True, timeout=180)
    finally:
        server.close()
        for c in held:
            c.close()
    assert res.returncode == 4 and "did not answer within 10 s" in res.stderr, res.stderr[-2000:]
    assert time.monotonic() - t < 120
