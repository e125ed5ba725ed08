"""Move every rank's record to rank 0 over torch.distributed, and every rank's exit code back.

Data plane: `torch.distributed.gather_object` on a gloo process group of its own (CPU tensors, no GPU
memory, no NCCL), so it works beside, before or inside an NCCL job. Control plane: the job's TCPStore
(torchrun's agent store, or one rank 0 hosts at MASTER_ADDR:MASTER_PORT), under a prefix of its own:

1. join: each rank, once its own check is done, sets `joined/<rank>` and bumps a counter; the last one
   sets `all-joined`. Waiting on that key is a server-side wait (no polling). After `timeout` rank 0
   lists the ranks without a `joined/<rank>` key: those never joined.
2. gather: init_process_group(gloo, store=<prefixed store>, timeout) and gather_object to rank 0. Every
   non-root rank sets `done/<rank>` when its part is over, success or not. If the gather fails (a rank
   died after joining: gloo sees the closed connection), rank 0 waits until the process group's
   timeout has passed for the others and names the ranks without a `done` key.
3. verdict: rank 0 publishes {exit_code, message}; every rank waits for it and exits with it. A rank
   that cannot reach the store, or gets no verdict in time, exits 4 naming rank 0.

Every wait is bounded by `timeout`: a missing or dead rank yields exit 4 and a message, never a hang.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kernelcheck.core.errors import FleetFailure
from kernelcheck.core.status import EXIT_BROKEN
from kernelcheck.fleet import summary
from kernelcheck.fleet.ranks import RankInfo
from kernelcheck.fleet.record import RankRecord

log = logging.getLogger(__name__)

_SLACK_S = 5.0

# Why a rank is missing from the fleet: the kind a decision or a test reads (the JSON's missing[].kind); the words
# for a person are table.py's (missing[].reason).
NEVER_JOINED = "never_joined"  # it did not join within the timeout (not started, crashed, or still checking)
DIED = "died"  # it joined, then died or hung during the gather
UNREADABLE = "unreadable"  # it sent a record this kernelcheck cannot read (another version's)
NO_REPORT = "no_report"  # compare --expect N: fewer report files than N
KINDS = (NEVER_JOINED, DIED, UNREADABLE, NO_REPORT)


@dataclass(frozen=True)
class Missing:
    """A rank without a record: why (`kind`, one of KINDS), and for NO_REPORT how many reports were expected and
    found."""

    kind: str
    expected: int | None = None
    found: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"missing kind {self.kind!r} is not one of {', '.join(KINDS)}")


@dataclass
class Outcome:
    exit_code: int
    message: str | None = None  # why the gate failed as a whole (missing / dead ranks, no verdict)
    records: list[RankRecord] = field(default_factory=list)  # rank 0 only: one per rank that reported
    missing: dict[int, Missing] = field(default_factory=dict)  # rank 0 only: rank -> why it has no record
    timings: dict[str, float] = field(default_factory=dict)
    store: Any = None

    readers: int = 0  # rank 0: how many other ranks will read the verdict (the missing and dead ones never do)

    def release(self) -> None:
        """Rank 0, once it has printed: the other ranks may exit now. Rank 0 itself stays (bounded) until every
        other rank has printed the fleet verdict: a launcher (torchrun) SIGTERMs the others as soon as one rank
        exits non-zero, and each rank's log must already say the verdict then."""
        if self.store is None:
            return
        try:
            self.store.set("released", "1")
            deadline = time.monotonic() + _SLACK_S
            while time.monotonic() < deadline and self.store.add("read", 0) < self.readers:
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 - the others stop waiting after their slack anyway
            log.info("release: %s", exc)


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks[:20]) + (f" and {len(ranks) - 20} more" if len(ranks) > 20 else "")


def _bounded(make: Callable[[], Any], seconds: float) -> Any:
    """`make()` in a daemon thread, waited for at most `seconds` (TimeoutError after): torch's TCPStore client
    waits in C++ with no bound of its own for a server that accepts the connection and never answers its ping.
    A thread left waiting ends with the process (the CLI exits with os._exit)."""
    box: list[Any] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            box.append(make())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            err.append(exc)

    t = threading.Thread(target=run, name="kernelcheck-rendezvous", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise TimeoutError(seconds)
    if err:
        raise err[0]
    return box[0]


def open_store(info: RankInfo, timeout: float) -> Any:
    """The job's TCPStore under kernelcheck's prefix; rank 0 hosts it unless torchrun's agent already does."""
    import torch.distributed as dist

    host = info.rank == 0 and not info.agent_store
    where = f"{info.master_addr}:{info.master_port}"
    try:
        store = _bounded(lambda: dist.TCPStore(  # type: ignore[attr-defined]  # torch's C++ store, not in __all__
            info.master_addr, info.master_port, None, host, timedelta(seconds=timeout), wait_for_workers=False,
            multi_tenant=True), timeout + _SLACK_S)
    except TimeoutError:
        raise FleetFailure(f"rank {info.rank}: the rendezvous at {where} accepted the connection but did not answer "
                           f"within {timeout + _SLACK_S:g} s (another service on that port, or a stuck rank 0). Check "
                           "MASTER_ADDR/MASTER_PORT.") from None
    except Exception as exc:  # noqa: BLE001 - RuntimeError / DistNetworkError, worded below
        if host:
            raise FleetFailure(f"rank 0 could not host the rendezvous store on {where} ({exc}); is the port in use? "
                               "Set MASTER_PORT to a free port.") from None
        raise FleetFailure(f"rank {info.rank} could not reach rank 0's store at {where} within {timeout:g} s: rank 0 "
                           f"never joined (not started, crashed, or still checking). ({type(exc).__name__})") from None
    return dist.PrefixStore(f"kernelcheck/fleet/{info.run_id}/", store)  # type: ignore[attr-defined]  # as above


def _wait(store: Any, key: str, seconds: float) -> bool:
    try:
        store.wait([key], timedelta(seconds=max(seconds, 0.01)))
        return True
    except Exception:  # noqa: BLE001 - DistStoreError on timeout
        return False


def _absent(store: Any, prefix: str, ranks: range) -> list[int]:
    return [r for r in ranks if not store.check([f"{prefix}/{r}"])]


def _join(store: Any, info: RankInfo, timeout: float) -> list[int]:
    """Announce this rank; return the ranks that did not join within `timeout` (rank 0 computes it)."""
    store.set(f"joined/{info.rank}", info.host)
    if store.add("joined", 1) == info.world_size:
        store.set("all-joined", "1")
    if _wait(store, "all-joined", timeout):
        return []
    if info.rank != 0:
        return [0] if not store.check(["joined/0"]) else [-1]  # -1: others missing; rank 0 will name them
    return _absent(store, "joined", range(info.world_size))


def _gather_records(store: Any, info: RankInfo, blob: bytes, timeout: float) -> list[bytes] | None:
    """gather_object over a gloo group of its own; None on any rank where it failed."""
    import torch.distributed as dist

    out: list[Any] | None = [None] * info.world_size if info.rank == 0 else None
    try:
        dist.init_process_group("gloo", store=dist.PrefixStore("pg/", store),  # type: ignore[attr-defined]
                                rank=info.rank,
                                world_size=info.world_size, timeout=timedelta(seconds=timeout))
        dist.gather_object(blob, out, dst=0)
    except Exception as exc:  # noqa: BLE001 - gloo raises RuntimeError/DistError when a peer dies
        log.info("rank %d: gather failed: %s", info.rank, exc)
        out = None
        if info.rank == 0:
            return None
    finally:
        if info.rank != 0:
            store.set(f"done/{info.rank}", "1")
            store.add("done", 1)
    return out if info.rank == 0 else []


def _dead_after_failure(store: Any, info: RankInfo, deadline: float) -> list[int]:
    """Ranks that joined but never finished their part of the gather (rank 0, after a failed gather)."""
    while time.monotonic() < deadline:
        if store.add("done", 0) >= info.world_size - 1:
            break
        time.sleep(0.2)
    return _absent(store, "done", range(1, info.world_size))


def _publish(store: Any, info: RankInfo, code: int, message: str | None, gone: int = 0) -> None:
    """Set the verdict; rank 0 hosting the store stays until the others (less the `gone`) have read it."""
    store.set("verdict", json.dumps({"exit_code": code, "message": message}))
    if info.agent_store or info.world_size == 1:
        return
    deadline = time.monotonic() + _SLACK_S  # rank 0 hosts the store: stay until the others have read it
    while time.monotonic() < deadline and store.add("read", 0) < info.world_size - 1 - gone:
        time.sleep(0.05)


Said = Callable[[int, "str | None"], None]  # told the fleet's code (and message) the moment a rank knows it


def _await_verdict(store: Any, info: RankInfo, seconds: float, said: Said | None = None) -> Outcome:
    try:
        if not _wait(store, "verdict", seconds):
            return Outcome(EXIT_BROKEN, f"rank {info.rank}: rank 0 published no fleet verdict within {seconds:g} s "
                                        "(it died or hangs; its own log says why).")
        got = json.loads(store.get("verdict"))
        if said is not None:
            said(int(got["exit_code"]), got.get("message"))
        store.add("read", 1)  # after the line is printed: rank 0 waits for it before exiting
        # Launchers stop the whole job at the first rank that exits non-zero: leave after rank 0 has
        # printed the table, so it is never cut off.
        if _wait(store, "released", _SLACK_S):
            time.sleep(0.5)
    except Exception as exc:  # noqa: BLE001 - rank 0 hosted the store and is gone
        return Outcome(EXIT_BROKEN, f"rank {info.rank}: lost rank 0 (it holds the rendezvous store) before the fleet "
                                    f"verdict ({type(exc).__name__}); rank 0 died.")
    return Outcome(int(got["exit_code"]), got.get("message"))


def _root_failure(store: Any, info: RankInfo, deadline: float) -> tuple[str, dict[int, Missing]]:
    dead = _dead_after_failure(store, info, deadline)
    if not dead:
        return "the gather failed on rank 0 while every rank finished its part (see rank 0's log)", {}
    return died_message(dead), {r: Missing(DIED) for r in dead}


def never_joined_message(ranks: list[int], world_size: int, timeout: float) -> str:
    return (f"rank {_ranks(ranks)} of {world_size} never joined within {timeout:g} s (not started, crashed "
            "before reporting, or its check took longer than --timeout)")


def died_message(ranks: list[int]) -> str:
    return f"rank {_ranks(ranks)} joined but died or hung during the gather (no answer within the timeout)"


def unreadable_message(ranks: dict[int, str]) -> str:
    return (f"rank {_ranks(sorted(ranks))} sent a record this kernelcheck cannot read ("
            + "; ".join(f"rank {r}: {why}" for r, why in sorted(ranks.items())[:3])
            + "): run one kernelcheck version on every rank (pin it in the image)")


def read_blobs(blobs: list[bytes]) -> tuple[list[RankRecord], dict[int, str]]:
    """The gathered blobs read back, once, here: the records, and the ranks whose blob is not one (why)."""
    records: list[RankRecord] = []
    bad: dict[int, str] = {}
    for r, blob in enumerate(blobs):
        try:
            records.append(summary.unpack(blob))
        except ValueError as exc:  # summary.unpack: not a record this kernelcheck reads
            bad[r] = str(exc)[:120]
    return records, bad


Decide = Callable[[list[RankRecord], dict[int, Missing]], int]


def gate(record: RankRecord, info: RankInfo, timeout: float, decide: Decide, said: Said | None = None) -> Outcome:
    """Run the three phases; `decide(records, missing)` (rank 0) turns the records into the fleet's exit code;
    `said(code, message)` is called on every rank as soon as it knows the fleet's verdict."""
    out = _gate(record, info, timeout, decide, said)
    gone = sum(1 for m in out.missing.values() if m.kind in (NEVER_JOINED, DIED))  # the others read the verdict
    out.readers = max(0, info.world_size - 1 - gone)
    return out


def _fail(store: Any, info: RankInfo, said: Said | None, msg: str, missing: dict[int, Missing]) -> Outcome:
    """Rank 0: the fleet is broken as a whole (ranks never joined or died): say it, publish it."""
    _say(said, EXIT_BROKEN, msg)
    _publish(store, info, EXIT_BROKEN, msg, gone=len(missing))
    return Outcome(EXIT_BROKEN, msg, missing=missing, store=store)


def _gate(record: RankRecord, info: RankInfo, timeout: float, decide: Decide, said: Said | None) -> Outcome:
    t0 = time.perf_counter()
    store = open_store(info, timeout)
    missing = _join(store, info, timeout)
    t_join = time.perf_counter()
    if missing and info.rank != 0:
        if missing == [0]:
            return Outcome(EXIT_BROKEN, f"rank 0 never joined within {timeout:g} s: it did not start, crashed, or its "
                                        "check took longer than --timeout.")
        return _await_verdict(store, info, _SLACK_S + 2, said)
    if missing:
        return _fail(store, info, said, never_joined_message(missing, info.world_size, timeout),
                     {r: Missing(NEVER_JOINED) for r in missing})
    deadline = time.monotonic() + timeout + _SLACK_S
    blobs = _gather_records(store, info, summary.pack(record), timeout)
    t_gather = time.perf_counter()
    if info.rank != 0:
        out = _await_verdict(store, info, max(deadline - time.monotonic(), 0) + _SLACK_S, said)
        _destroy()
        return out
    if blobs is None:
        msg, dead = _root_failure(store, info, deadline)
        return _fail(store, info, said, msg, dead)
    records, bad = read_blobs(blobs)
    unread = {r: Missing(UNREADABLE) for r in bad}
    code = decide(records, unread)
    message = unreadable_message(bad) if bad else None
    _say(said, code, message)
    _publish(store, info, code, message)
    _destroy()
    return Outcome(code, message, records=records, missing=unread, store=store,
                   timings={"join_s": t_join - t0, "gather_s": t_gather - t_join,
                            "bytes_per_rank_max": float(max(len(b) for b in blobs))})


def _say(said: Said | None, code: int, message: str | None) -> None:
    if said is not None:
        said(code, message)


def _destroy() -> None:
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - nothing left to do about it
        log.info("destroy_process_group: %s", exc)
