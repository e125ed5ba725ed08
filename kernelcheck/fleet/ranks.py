"""Where this process sits in a multi-node job, read from the launcher's environment variables.

Three launchers are understood, in this order:

* torchrun / torch.distributed.run (and anything else that sets them): RANK, WORLD_SIZE, LOCAL_RANK,
  MASTER_ADDR, MASTER_PORT. Under torchrun the agent hosts the TCPStore (TORCHELASTIC_USE_AGENT_STORE).
* Slurm `srun` without torchrun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the rendezvous host is
  MASTER_ADDR if set, else the first host of SLURM_NODELIST (or SLURM_JOB_NODELIST); the port is
  MASTER_PORT if set, else derived from SLURM_JOB_ID so two jobs on one node do not collide.
* A Kubernetes indexed Job: JOB_COMPLETION_INDEX is the rank; WORLD_SIZE (the Job's completions),
  MASTER_ADDR (pod 0's DNS name, e.g. `gate-0.gate`) and MASTER_PORT come from the pod spec.

Decisions take the environment as an argument (a mapping) so tests pass it in explicitly.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from kernelcheck.core.errors import BadInput

log = logging.getLogger(__name__)

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | env | slurm | kubernetes
    agent_store: bool  # torchrun's agent already hosts the TCPStore: every rank is a client
    run_id: str  # keeps two gates (or a torchrun restart) in one store apart
    host: str


def first_slurm_host(nodelist: str) -> str:
    """The first host of a Slurm hostlist: `gpu[003-005,009],cpu01` -> `gpu003`."""
    m = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not m:
        raise BadInput(f"SLURM_NODELIST {nodelist!r} is not a Slurm hostlist; set MASTER_ADDR to rank 0's host.")
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise BadInput(f"--all-ranks: {name}={raw!r} is not an integer.") from None


def _run_id(env: Mapping[str, str]) -> str:
    if env.get("TORCHELASTIC_RUN_ID"):
        return f"{env['TORCHELASTIC_RUN_ID']}.{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    if env.get("SLURM_JOB_ID"):
        return f"{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '0')}"
    return env.get("KERNELCHECK_FLEET_ID", "0")


def _placement(env: Mapping[str, str]) -> tuple[str, int, int, int]:
    """(launcher, rank, world_size, local_rank) from the first launcher whose variables are set."""
    if env.get("RANK") and env.get("WORLD_SIZE"):
        launcher = "torchrun" if env.get("TORCHELASTIC_RUN_ID") else "env"
        return launcher, _int(env, "RANK"), _int(env, "WORLD_SIZE"), _int({"L": env.get("LOCAL_RANK", "0")}, "L")
    if env.get("SLURM_PROCID") and env.get("SLURM_NTASKS"):
        return ("slurm", _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS"),
                _int({"L": env.get("SLURM_LOCALID", "0")}, "L"))
    if env.get("JOB_COMPLETION_INDEX"):
        if not env.get("WORLD_SIZE"):
            raise BadInput("--all-ranks in a Kubernetes indexed Job needs WORLD_SIZE (the Job's completions) in the "
                           "pod's env; see examples/k8s-indexed-job.yaml.")
        return "kubernetes", _int(env, "JOB_COMPLETION_INDEX"), _int(env, "WORLD_SIZE"), 0
    raise BadInput("--all-ranks found no launcher: set by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), "
                   "srun (SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST) or an indexed Kubernetes Job "
                   "(JOB_COMPLETION_INDEX plus WORLD_SIZE and MASTER_ADDR in the pod spec). Run it under one of "
                   "those, or drop --all-ranks to check this machine only (docs/fleet.md).")


def _master(env: Mapping[str, str], launcher: str) -> tuple[str, int]:
    addr = env.get("MASTER_ADDR")
    if not addr and launcher == "slurm":
        nodelist = env.get("SLURM_NODELIST") or env.get("SLURM_JOB_NODELIST")
        if nodelist:
            addr = first_slurm_host(nodelist)
    if not addr:
        if launcher != "env" and launcher != "torchrun":
            raise BadInput(f"--all-ranks under {launcher} needs MASTER_ADDR: the host of rank 0 (docs/fleet.md).")
        addr = "127.0.0.1"
        log.info("MASTER_ADDR not set; using %s", addr)
    if env.get("MASTER_PORT"):
        port = _int(env, "MASTER_PORT")
    elif launcher == "slurm" and env.get("SLURM_JOB_ID", "").isdigit():
        port = 20000 + int(env["SLURM_JOB_ID"]) % 20000
    else:
        port = DEFAULT_PORT
    if not 0 < port < 65536:
        raise BadInput(f"--all-ranks: MASTER_PORT {port} is not a TCP port.")
    return addr, port


def discover(env: Mapping[str, str], host: str | None = None) -> RankInfo:
    """This process's rank, the job's size and the rendezvous point, or BadInput saying what is missing."""
    launcher, rank, world, local = _placement(env)
    if world < 1 or not 0 <= rank < world:
        raise BadInput(f"--all-ranks: rank {rank} is outside a job of {world} ranks (launcher {launcher}).")
    addr, port = _master(env, launcher)
    return RankInfo(rank=rank, world_size=world, local_rank=local, master_addr=addr, master_port=port,
                    launcher=launcher, agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
                    run_id=_run_id(env), host=host or socket.gethostname())
