"""The fleet gate for Ray: each worker checks its own environment before actor code, the driver shows the fleet.

`gate` is a `worker_process_setup_hook` (runtime_env={"worker_process_setup_hook": "kernelcheck.ray.gate",
"env_vars": {"KERNELCHECK_GATE_MODEL": ..., "KERNELCHECK_GATE_MODE": ...}}): Ray runs it in every worker process
before any task or actor code. It runs `python -m kernelcheck doctor --json` with the worker's own interpreter
(sys.executable, the worker's environment variables) in a child process bounded by KERNELCHECK_GATE_TIMEOUT, and
keeps the verdict in a node-local cache keyed by the environment's fingerprint (interpreter, installed
distributions and versions, the variables that change what runs, the node's GPUs): the workers of one environment
on a node pay one check, the others wait on a file lock and read its verdict. A verdict other than READY raises
GateFailed: Ray ends the worker before actor code and the driver's error carries the verdict line, the function at
fault, the fix, and the worker's record (one `kernelcheck-record:` line).

`gather` (driver side) asks every actor for its record (a worker that failed to start: read from the error Ray
returns) and renders the fleet table `--all-ranks` prints, each worker as a rank: the same JSON
(`kernelcheck.fleet/1`), the same ODD differences, the same exit code (the worst worker's).

Importing this module needs the standard library and kernelcheck only: ray is imported inside `gather`.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import importlib
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernelcheck.core import lifeline, settings
from kernelcheck.core.errors import BadInput, GateFailed
from kernelcheck.core.status import EXIT_INTERNAL, EXIT_READY, EXIT_USAGE, VERDICT_WORDS, Verdict
from kernelcheck.core.version import __version__
from kernelcheck.fleet import blame, summary, table
from kernelcheck.fleet.gather import DIED, NEVER_JOINED, Missing
from kernelcheck.fleet.record import RankRecord

MODEL_VARIABLE, MODE_VARIABLE, TIMEOUT_VARIABLE = "KERNELCHECK_GATE_MODEL", "KERNELCHECK_GATE_MODE", \
    "KERNELCHECK_GATE_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
CACHE_SECONDS = 3600  # a verdict is reused on its node for an hour; a changed environment has another key anyway
RECORD_MARK = "kernelcheck-record: "
# The variables that enter the fingerprint: what changes which kernel runs or where Python finds packages.
# CUDA_VISIBLE_DEVICES is left out on purpose: Ray gives each GPU actor its own, and the node's GPUs are in the key.
_PREFIXES = ("FLA_", "TRANSFORMERS_", "KERNELCHECK_", "HF_", "PYTHON", "TORCH", "TRITON_", "NVIDIA_", "LD_")
_NAMES = ("USE_HUB_KERNELS", "LOCAL_KERNELS", "PATH", "VIRTUAL_ENV", "CONDA_PREFIX")
_LEFT_OUT = ("CUDA_VISIBLE_DEVICES", "PYTHONUNBUFFERED")


@dataclass(frozen=True)
class GateVerdict:
    """One environment's verdict as the gate keeps it (the cache file's content): the exit code, the record the
    fleet table reads, and the lines a failed worker's error shows."""

    exit_code: int
    record: dict[str, Any]
    lines: list[str]
    checked_at: float
    seconds: float
    checked_by: int  # the pid of the worker that ran the check
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "record": self.record, "lines": self.lines,
                "checked_at": self.checked_at, "seconds": self.seconds, "checked_by": self.checked_by}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GateVerdict:
        return cls(int(data["exit_code"]), dict(data["record"]), [str(x) for x in data["lines"]],
                   float(data["checked_at"]), float(data["seconds"]), int(data["checked_by"]), cached=True)


_LAST: GateVerdict | None = None  # this worker process's verdict, for gather (None: the gate did not run here)


def gate() -> None:
    """Ray's worker_process_setup_hook: check this worker's environment; raise GateFailed unless READY."""
    global _LAST
    model, mode = settings.variable(MODEL_VARIABLE), settings.variable(MODE_VARIABLE) or "train"
    timeout = _timeout()
    if not model or timeout is None:
        why = (f"{MODEL_VARIABLE} is not set in this worker's environment: give the model to check in the "
               f"runtime_env's env_vars ({MODEL_VARIABLE}=qwen3.8-27b, {MODE_VARIABLE}=train)" if not model else
               f"{TIMEOUT_VARIABLE}={settings.variable(TIMEOUT_VARIABLE)!r} is not a number of seconds above 0")
        _LAST = _stopped(EXIT_USAGE, why, socket.gethostname(), time.time())
        raise GateFailed("\n".join([*_LAST.lines, f"{RECORD_MARK}{_packed(_LAST)}"]), EXIT_USAGE)
    verdict = check(model, mode, timeout=timeout)
    _LAST = verdict
    if verdict.exit_code != EXIT_READY:
        raise GateFailed(failure_message(verdict, model, mode), verdict.exit_code)


def _timeout() -> float | None:
    """KERNELCHECK_GATE_TIMEOUT in seconds (default 300); None when it is not a finite number above 0."""
    raw = settings.variable(TIMEOUT_VARIABLE)
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _gpus() -> list[str]:
    """The node's GPUs and driver as the NVIDIA driver lists them (no CUDA context, no torch import)."""
    root = Path("/proc/driver/nvidia")
    out = []
    with contextlib.suppress(OSError):
        out.append((root / "version").read_text().splitlines()[0])
    with contextlib.suppress(OSError):
        for info in sorted((root / "gpus").glob("*/information")):
            out += [line for line in info.read_text().splitlines() if line.startswith(("Model", "Bus Location"))]
    return out


def _distributions(path: Sequence[str]) -> list[str]:
    """Every installed distribution and its version, from the metadata folders' names on `path`
    (`name-1.2.dist-info`, an egg-info's): a directory listing per entry, no file read (every worker pays it)."""
    out: set[str] = set()
    for entry in path:
        with contextlib.suppress(OSError):
            out.update(f"{entry}:{n}" for n in os.listdir(entry or ".") if n.endswith((".dist-info", ".egg-info")))
    return sorted(out)


def fingerprint(model: str, mode: str, environ: Mapping[str, str], python: str = sys.executable,
                path: Sequence[str] | None = None) -> str:
    """The cache key: the interpreter, every installed distribution with its version, the variables that change
    which kernel runs or which packages import, the node's GPUs, kernelcheck's version, the model and mode."""
    dists = _distributions(sys.path if path is None else path)
    env = {k: v for k, v in sorted(environ.items())
           if (k.startswith(_PREFIXES) or k in _NAMES) and k not in _LEFT_OUT}
    blob = json.dumps({"python": python, "version": sys.version, "kernelcheck": __version__, "model": model,
                       "mode": mode, "distributions": dists, "env": env, "gpus": _gpus()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def cache_dir() -> Path:
    return settings.current().home / "ray-gate"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One worker at a time per environment on this node: the others wait here, then read its verdict."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_cached(path: Path, now: float) -> GateVerdict | None:
    try:
        got = GateVerdict.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or a file this version does not read: check again
    return got if 0 <= now - got.checked_at < CACHE_SECONDS else None


def check(model: str, mode: str, timeout: float = DEFAULT_TIMEOUT, environ: Mapping[str, str] | None = None,
          python: str = sys.executable, folder: Path | None = None) -> GateVerdict:
    """This environment's verdict: the cached one when a worker of an identical environment on this node has it,
    else a check run now (and cached, unless it could not finish)."""
    env = dict(os.environ if environ is None else environ)
    folder = cache_dir() if folder is None else folder
    key = fingerprint(model, mode, env, python)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache here (a read-only home): every worker checks for itself
        return run_check(model, mode, timeout, env, python)
    with _locked(folder / f"{key}.lock"):
        got = _read_cached(folder / f"{key}.json", time.time())
        if got is not None:
            return got
        got = run_check(model, mode, timeout, env, python)
        if got.exit_code != EXIT_INTERNAL:  # an internal error or a timeout may pass: the next worker tries again
            tmp = folder / f"{key}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(got.to_json()))
            os.replace(tmp, folder / f"{key}.json")
        return got


def run_check(model: str, mode: str, timeout: float, environ: Mapping[str, str], python: str) -> GateVerdict:
    """`python -m kernelcheck doctor --json` in a child process of this worker's interpreter and environment."""
    cmd = [python, "-m", "kernelcheck", "doctor", "--model", model, "--mode", mode, "--json"]
    start, host = time.time(), socket.gethostname()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=dict(environ), timeout=timeout,
                             preexec_fn=lifeline.preexec(),
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        # an internal error (exit 1), never cached: the worker stops rather than run unchecked
        return _stopped(EXIT_INTERNAL, f"the check took longer than {timeout:g} s ({TIMEOUT_VARIABLE}); "
                        "this worker was stopped rather than let through unchecked", host, start)
    except OSError as exc:
        return _stopped(EXIT_INTERNAL, f"cannot run {python}: {exc}", host, start)
    try:
        report = summary.check_report(json.loads(res.stdout), "the worker's check")
    except (ValueError, BadInput):
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        return _stopped(res.returncode or EXIT_INTERNAL, f"`{' '.join(cmd[1:])}` exited {res.returncode} without a "
                        f"report: {' / '.join(tail) or 'no output'}", host, start)
    rec = summary.summarise(report, host=host)
    return GateVerdict(rec.exit_code, rec.to_json(), _lines(report), start, time.time() - start, os.getpid())


def _stopped(code: int, message: str, host: str, start: float) -> GateVerdict:
    rec = RankRecord(exit_code=code, error=message, command="doctor", host=host)
    return GateVerdict(code, rec.to_json(), [f"kernelcheck gate: {message} (exit {code})"], start,
                   time.time() - start, os.getpid())


def _text(value: Any) -> str:
    if isinstance(value, dict):  # a structured fix: its command or text
        return str(value.get("command") or value.get("text") or json.dumps(value))
    return str(value)


def _lines(report: Mapping[str, Any]) -> list[str]:
    """The verdict line and what is at fault: the functions with the verdict's status that the job uses (their
    reason and fix), or the report's error."""
    code = report.get("exit_code")
    if report.get("verdict") is None:
        return [f"kernelcheck gate: the check stopped (exit {code}): {report.get('error')}"]
    device = report.get("device") or {}
    where = " ".join(str(x) for x in (device.get("type"), device.get("name")) if x) or "unknown"
    out = [f"verdict: {VERDICT_WORDS[Verdict(report['verdict'])]} (exit {code}) · device {where}"]
    bad = [f for f in report.get("functions") or [] if f.get("status") == report["verdict"] and f.get("used", True)]
    for f in bad[:3]:
        out.append(f"  {f.get('name')} ({f.get('package')}): {f.get('status')}: {f.get('reason')}")
        if f.get("fix"):
            out.append(f"    fix: {_text(f['fix'])}")
    if len(bad) > 3:
        out.append(f"  and {len(bad) - 3} more functions")
    for f in report.get("findings") or []:
        if f.get("severity") == "error":
            out.append(f"  {f.get('id')}: {f.get('message')}" + (f"  fix: {_text(f['fix'])}" if f.get("fix") else ""))
    return out


def failure_message(verdict: GateVerdict, model: str, mode: str) -> str:
    """The error the driver sees: where, the verdict and the fix, how to see the whole report, and the record."""
    how = (f"verdict reused from the check of pid {verdict.checked_by} ({verdict.seconds:.1f} s) for this same "
           "environment on this node" if verdict.cached else f"checked in {verdict.seconds:.1f} s")
    record = _packed(verdict)
    return "\n".join([
        f"kernelcheck gate stopped this Ray worker before actor code (host {socket.gethostname()}, pid {os.getpid()}, "
        f"python {sys.executable}; {how})",
        *verdict.lines,
        f"the whole report: {sys.executable} -m kernelcheck doctor --model {model} --mode {mode}",
        f"{RECORD_MARK}{record}"])


def record_in(text: str) -> RankRecord | None:
    """The record a failed worker's error carries (its `kernelcheck-record:` line), or None."""
    m = re.search(re.escape(RECORD_MARK) + r"([A-Za-z0-9+/=]+)", text)
    if m is None:
        return None
    try:
        return summary.unpack(base64.b64decode(m.group(1)))
    except (ValueError, TypeError):
        return None


def worker_record(actor: Any = None) -> str | None:
    """In a worker (through `actor.__ray_call__`): its gate's record, packed and base64'd; None without a gate."""
    return None if _LAST is None else _packed(_LAST)


def _packed(verdict: GateVerdict) -> str:
    """The record as this worker sends it: where it ran is this process (a cached verdict's is the checker's)."""
    rec = replace(RankRecord.from_json(verdict.record), host=f"{socket.gethostname()} pid {os.getpid()}")
    return base64.b64encode(summary.pack(rec)).decode()


@dataclass(frozen=True)
class Fleet:
    """The workers' verdicts as the fleet gate shows them: `text` (the table), `to_json()` (kernelcheck.fleet/1),
    `exit_code` (the worst worker's; 4 when one never reported)."""

    records: list[RankRecord]
    missing: dict[int, Missing]
    exit_code: int

    @property
    def text(self) -> str:
        return table.render_text("doctor", self.records, self.missing, self.exit_code,
                                 head=f"kernelcheck.ray.gather · {len(self.records) + len(self.missing)} workers")

    def to_json(self) -> dict[str, Any]:
        return table.to_json("doctor", self.records, self.missing, self.exit_code, extra={"launcher": "ray"})

    def blame(self, fmt: str) -> dict[str, Any]:
        """The workers' verdicts for a cluster's health tooling: fmt "healthevent" or "nodeverdict" (fleet/blame)."""
        return blame.render(fmt, self.records)


def records_of(results: Sequence[tuple[RankRecord | None, str | None, bool]]) -> Fleet:
    """The fleet from each worker's (record, host, died): a worker's index is its rank; a worker with no record is
    missing (died: it failed without a gate record; else it did not answer in time)."""
    records: list[RankRecord] = []
    missing: dict[int, Missing] = {}
    for rank, (rec, host, died) in enumerate(results):
        if rec is None:
            missing[rank] = Missing(DIED if died else NEVER_JOINED)
            continue
        records.append(replace(rec, rank=rank, host=host or rec.host, label=None))
    return Fleet(records, missing, table.fleet_code(records, missing))


def gather(workers: Sequence[Any], timeout: float = 120.0, names: Sequence[str] | None = None) -> Fleet:
    """The driver's fleet table over Ray actors (each one a rank, in the order given): a started actor answers
    with its gate's record, one that failed to start carries it in Ray's error. `names` label the workers
    (default: the record's host and the actor's class)."""
    ray = importlib.import_module("ray")  # the driver's ray; this module imports without it
    results: list[tuple[RankRecord | None, str | None, bool]] = []
    for i, w in enumerate(workers):
        label = names[i] if names is not None else _actor_label(w)
        try:
            blob = ray.get(w.__ray_call__.remote(worker_record), timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            results.append((None, label, False))
            continue
        except ray.exceptions.RayError as exc:
            rec = record_in(str(exc))
            results.append((rec, _host(rec, label), rec is None))
            continue
        if blob is None:
            rec = RankRecord(exit_code=EXIT_USAGE, command="doctor", error="no gate ran in this worker: its "
                             "runtime_env has no worker_process_setup_hook 'kernelcheck.ray.gate'")
            results.append((rec, label, False))
            continue
        rec = summary.unpack(base64.b64decode(blob))
        results.append((rec, _host(rec, label), False))
    return records_of(results)


def _actor_label(worker: Any) -> str | None:
    with contextlib.suppress(AttributeError):
        return str(worker._ray_actor_creation_function_descriptor.class_name)
    return None


def _host(rec: RankRecord | None, label: str | None) -> str | None:
    host = rec.host if rec is not None else None
    return ", ".join(x for x in (host, label) if x) or None

