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
