"""Time the fleet gather on CPU at several local world sizes, side by side, in one run.

    /work/main/.venv/bin/python benchmarks/fleet_gather.py            # 3, 8, 32 processes
    /work/main/.venv/bin/python benchmarks/fleet_gather.py 3 8 32 64

Each size forks N processes (fork: torch is imported once, so 32 processes start in seconds on
2 cores), which open a TCPStore and a gloo group as the gate does, then time only the gather:
the real gate once (join + init_process_group + gather_object + verdict, from kernelcheck.fleet.gather),
then `gather_object` to rank 0 repeated, with the record a rank really sends (a summarised doctor
report, zlib: ~1 KB) and with the full report JSON (~12 KB) for contrast. Startup is not timed.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from kernelcheck.fleet import gather, ranks, summary, table  # noqa: E402

REPEAT = 20


def _report() -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b", "--json"],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def _time_gather(blob: bytes, world: int, rank: int) -> float:
    out = [None] * world if rank == 0 else None
    dist.barrier()
    times = []
    for _ in range(REPEAT):
        dist.barrier()
        t = time.perf_counter()
        dist.gather_object(blob, out, dst=0)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _worker(rank: int, world: int, port: int, report: dict[str, Any], results: Any) -> None:
    env = {"RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "KERNELCHECK_FLEET_ID": "bench"}
    info = ranks.discover(env)
    record = summary.summarise(report, rank=rank, host=info.host)
    outcome = gather.gate(record, info, 120.0, table.fleet_code)  # the real gate, once
    outcome.release()
    small = summary.pack(record)
    full = json.dumps(report).encode()
    store = dist.TCPStore("127.0.0.1", port + 1, world, rank == 0, timedelta(seconds=120))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    t_small = _time_gather(small, world, rank)
    t_full = _time_gather(full, world, rank)
    dist.destroy_process_group()
    if rank == 0:
        results.put({"n": world, "gate_join_s": outcome.timings["join_s"], "gate_gather_s": outcome.timings["gather_s"],
                     "small_bytes": len(small), "full_bytes": len(full), "small_ms": t_small * 1e3,
                     "full_ms": t_full * 1e3, "exit": outcome.exit_code})


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(sizes: list[int]) -> None:
    report = _report()
    ctx = mp.get_context("fork")
    rows = []
    for n in sizes:
        q = ctx.Queue()
        port = _port()
        t = time.perf_counter()
        procs = [ctx.Process(target=_worker, args=(r, n, port, report, q)) for r in range(n)]
        for p in procs:
            p.start()
        row = q.get(timeout=600)
        for p in procs:
            p.join()
        row["wall_s"] = time.perf_counter() - t
        rows.append(row)
    print(f"fleet gather on CPU, {os.cpu_count()} cores, gloo, torch {dist.torch.__version__}, "
          f"median of {REPEAT} gather_object calls to rank 0")
    print(f"{'ranks':>5}  {'gate join':>9}  {'gate init+gather':>16}  {'gather 1 rec':>12}  {'gather full report':>18}"
          f"  {'rank-0 holds (padded)':>21}  {'run wall':>8}")
    for r in rows:
        held = r["n"] * r["small_bytes"]
        print(f"{r['n']:>5}  {r['gate_join_s'] * 1e3:>7.1f}ms  {r['gate_gather_s'] * 1e3:>14.1f}ms  "
              f"{r['small_ms']:>9.2f}ms  {r['full_ms']:>15.2f}ms  {held / 1024:>17.1f} KiB  {r['wall_s']:>7.1f}s")
    print(f"record per rank: {rows[0]['small_bytes']} bytes (summarised + zlib); full report JSON: "
          f"{rows[0]['full_bytes']} bytes")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [3, 8, 32])
