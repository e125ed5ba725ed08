"""The fleet gate's decisions, in process: which rank this is under each launcher, and the fleet's exit code.
The runs with real torchrun ranks are in tests/integration/test_fleet.py (integration lane)."""

from __future__ import annotations

import pytest

from kernelcheck.core.errors import BadInput
from kernelcheck.fleet import ranks, table
from kernelcheck.fleet.gather import NEVER_JOINED, Missing
from kernelcheck.fleet.record import RankRecord


def test_rank_discovery_from_each_launcher():
    tr = ranks.discover({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "n0", "MASTER_PORT": "29500",
                         "TORCHELASTIC_RUN_ID": "j", "TORCHELASTIC_USE_AGENT_STORE": "True"}, host="h")
    assert (tr.rank, tr.world_size, tr.local_rank, tr.launcher, tr.agent_store) == (5, 8, 1, "torchrun", True)
    sl = ranks.discover({"SLURM_PROCID": "3", "SLURM_NTASKS": "16", "SLURM_LOCALID": "3",
                         "SLURM_NODELIST": "gpu[007-010,012]", "SLURM_JOB_ID": "4242"}, host="h")
    assert (sl.rank, sl.world_size, sl.master_addr, sl.master_port, sl.launcher) == (3, 16, "gpu007", 24242, "slurm")
    k8 = ranks.discover({"JOB_COMPLETION_INDEX": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "gate-0.gate"}, host="h")
    assert (k8.rank, k8.world_size, k8.master_addr, k8.launcher) == (2, 4, "gate-0.gate", "kubernetes")
    for bad in ({}, {"RANK": "4", "WORLD_SIZE": "4"}, {"JOB_COMPLETION_INDEX": "0"}, {"RANK": "x", "WORLD_SIZE": "2"}):
        with pytest.raises(BadInput):
            ranks.discover(bad, host="h")


def test_fleet_code_is_the_worst_and_missing_is_broken():
    recs = [RankRecord(exit_code=0), RankRecord(exit_code=3)]
    assert table.fleet_code(recs, {}) == 3
    assert table.fleet_code([*recs, RankRecord(exit_code=2)], {}) == 2
    assert table.fleet_code(recs, {2: Missing(NEVER_JOINED)}) == 4
    assert table.fleet_code([], {}) == 4
