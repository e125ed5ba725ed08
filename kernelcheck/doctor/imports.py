"""doctor's import proofs, off its critical path and out of its own process.

Whether a kernel package imports, and what transformers would bind from it, is only known by importing it,
and that is the slow part of doctor: `import fla.ops.gated_delta_rule` pulls in torch._dynamo and
inductor (seconds). doctor forks its children right after `import torch` (before any CUDA call or thread),
so each child starts with exactly the state the old in-process sequence had at that point (sys.path,
sys.modules with torch, warnings, environment) and pays nothing for torch again. doctor reads transformers'
source and probes the machine meanwhile, then sends each child its steps and joins them at the end with a
bounded wait (KERNELCHECK_IMPORT_TIMEOUT).

A child runs the very functions doctor ran in-process before (transformers.resolve_decorated,
environment.probe_package, bind_exact), in the same order, so the answers are the same; only the process
differs. Packages are split over children (one per installed kernel package, at most CPUs - 1 of them) only
where the steps touch one package each (the static reading of the decorator regime); otherwise one child runs
the whole sequence. What the packages print while importing goes to a file, shown only when a child dies.

The answers are cached (doctor/proofcache.py): `start` looks the environment's key up before forking; on a
hit no child is started, the steps planned are compared with the stored ones at `send`, and when they are
the same the stored answers are the children's (nothing is imported). When they differ (the same query now
means another model), fresh interpreters prove them (a fork is no longer safe then: CUDA may be
initialised). `annotate` says where the answers came from and stores a complete, successful proof.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import select
import sys
import tempfile
import time
import warnings
from typing import IO, Any

from kernelcheck.core import entry, environment, lifeline, matrix, settings
from kernelcheck.doctor import proofcache
from kernelcheck.integrations import transformers
from kernelcheck.report.model import ImportProof, Report
from kernelcheck.report.progress import working

DEFAULT_TIMEOUT = 300.0


def import_timeout() -> float:
    """Seconds doctor waits for its import proofs (KERNELCHECK_IMPORT_TIMEOUT, default 300)."""
    return settings.seconds("KERNELCHECK_IMPORT_TIMEOUT")


# ---------------------------------------------------------------------------------------------------------------
# child side
# ---------------------------------------------------------------------------------------------------------------


def _attr_check(module: str, function: str) -> dict[str, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"has": hasattr(importlib.import_module(module), function)}
    except Exception as exc:  # noqa: BLE001 - the failure is the answer (as in doctor's why_torch)
        return {"error": f"{type(exc).__name__}: {exc}"}


def _run_step(step: dict[str, Any], results: list[Any], m: matrix.Matrix) -> Any:
    kind = step["kind"]
    if kind == "resolve":
        read = transformers.StaticRead(step["dotted"], (), step["submodule_fallback"])
        return transformers.resolve_decorated(read, transformers.Decorated(**step["decorated"]))
    if kind == "exact":
        return dataclasses.asdict(transformers.bind_exact(step["module"], tuple(step["functions"]), m=m))
    if kind == "probe":
        return dataclasses.asdict(environment.probe_package(m.packages[step["name"]]))
    if kind == "attrs":  # `why_torch`'s check, for the functions of packages that imported in this child
        fns = list(step["functions"])
        for i in step.get("discovered_from", []):
            fns.extend(results[i].get("discovered", []))
        imported = {r["name"] for r in results if isinstance(r, dict) and "imports" in r and r["imports"]}
        out = {}
        for fn in dict.fromkeys(fns):
            info = m.functions.get(fn)
            if info is not None and info.package in imported:
                out[fn] = _attr_check(info.module, fn)
        return out
    raise ValueError(f"unknown step {kind!r}")


def _child(plan_fd: int, result_fd: int, err_fd: int, inherited: list[int], m: matrix.Matrix | None = None,
           parent: int | None = None) -> None:
    """A forked child: read its steps (one JSON line), run them in order on the parent's matrix `m`, write the
    results as JSON; never returns (os._exit: the parent's atexit handlers and buffers are not the child's).
    A child in a fresh interpreter (`_spawn_fresh`) has no parent matrix in memory: it reads its own."""
    code = 1
    lifeline.tie(parent)  # a SIGKILLed doctor leaves no import child running (core/lifeline.py)
    try:
        if m is None:
            m = entry.matrix()
        for fd in inherited:  # the other children's pipe ends: their EOFs must not wait for this process
            os.close(fd)
        os.dup2(err_fd, 1)
        os.dup2(err_fd, 2)
        with os.fdopen(plan_fd, "rb") as fh:
            steps = json.loads(fh.readline() or b"[]")
        results: list[Any] = []
        for step in steps:
            sys.stderr.write(f"kernelcheck-step {json.dumps(step)}\n")
            sys.stderr.flush()
            results.append(_run_step(step, results, m))
        with os.fdopen(result_fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(results))
        code = 0
    except BaseException:  # noqa: BLE001 - the parent reports a child that dies
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


# ---------------------------------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Child:
    pid: int
    plan_fd: int  # parent's write end
    result_fd: int  # parent's read end
    stderr: IO[str] | None  # None: a placeholder (answers from the cache)
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    results: list[Any] | None = None
    failure: str | None = None
    status: int | None = None  # waitpid status once reaped


class ImportProbe:
    """The children of one doctor run. `start` before importing torch; `plan_*` once the steps are known, then
    `send`; the readers (`packages`, `resolved`, `exact`, `attr`) join the children on first use."""

    def __init__(self, m: matrix.Matrix) -> None:
        self._m = m
        self._absent = {n: environment.absent_state(p) for n, p in m.packages.items()}
        self.installed = [n for n, st in self._absent.items() if st is None]
        self._children: list[_Child] = []
        self._joined = False
        self._owner: dict[str, int] = {}  # package -> child
        self._probe_at: dict[str, tuple[int, int]] = {}
        self._resolve_at: list[tuple[int, int] | None] = []
        self._exact_at: list[tuple[int, int]] = []
        self._exact_dotted = ""
        self._attrs_at: dict[int, tuple[int, int]] = {}
        self._fingerprint: dict[str, Any] | None = None  # the proof cache's key (None: cache off)
        self._key = ""
        self._stored: dict[str, Any] | None = None  # a stored proof for the key: no child forked
        self._sys_path: list[str] = []
        self.source = "proven"  # or "cache" once send() found the stored steps equal

    @classmethod
    def start(cls, single: bool, query: str | None, m: matrix.Matrix, cache: bool = True) -> ImportProbe:
        """Children for this machine: one when a single sequence must run (`single`), else one per installed
        kernel package, at most CPUs - 1 (the parent keeps one core). Call right after `import torch`.
        With a stored proof for this environment (proofcache) no child starts: `send` decides. `cache` False
        (`doctor --no-cache`): prove afresh and store nothing, as KERNELCHECK_IMPORT_CACHE=0."""
        probe = cls(m)
        n = 1 if single else min(len(probe.installed), max(1, (os.cpu_count() or 2) - 1))
        if cache and proofcache.enabled():
            probe._sys_path = list(sys.path)
            try:
                probe._fingerprint = proofcache.fingerprint(query, single, n, m)
            except Exception as exc:  # noqa: BLE001 - no key, no cache: prove as without one
                proofcache.log.info("import proof cache off for this run (%s: %s)", type(exc).__name__, exc)
                probe._fingerprint = None
            if probe._fingerprint is not None:
                probe._key = proofcache.key_of(probe._fingerprint)
                probe._stored = proofcache.load(probe._key)
            if probe._stored is not None and len(probe._stored["children"]) != n:
                probe._stored = None
        for _ in range(n):
            probe._spawn()
        return probe

    def _spawn(self) -> None:
        if self._stored is not None:  # a placeholder: send() fills it from the cache or a fresh interpreter
            self._children.append(_Child(-1, -1, -1, None, status=0))
            return
        err = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in close()
        plan_r, plan_w = os.pipe()
        result_r, result_w = os.pipe()
        inherited = [fd for c in self._children for fd in (c.plan_fd, c.result_fd)] + [plan_w, result_r]
        sys.stdout.flush()
        sys.stderr.flush()
        parent = lifeline.parent_for_tie()
        pid = os.fork()
        if pid == 0:
            _child(plan_r, result_w, err.fileno(), inherited, self._m, parent)
        os.close(plan_r)
        os.close(result_w)
        self._children.append(_Child(pid, plan_w, result_r, err))

    def _spawn_fresh(self, steps: list[dict[str, Any]]) -> _Child:
        """A child in a new interpreter (torch imported first, this process's sys.path at start), for steps
        the cache did not have: forking now could hand the child an initialised CUDA."""
        err = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in close()
        plan_r, plan_w = os.pipe()
        result_r, result_w = os.pipe()
        code = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); import torch; "
                "from kernelcheck.doctor.imports import _child; "
                "_child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), [], None, "
                "int(sys.argv[5]) if sys.argv[5] else None)")
        passed = (plan_r, result_w, err.fileno())
        for fd in passed:
            os.set_inheritable(fd, True)
        try:
            pid = os.posix_spawn(sys.executable, [sys.executable, "-c", code, json.dumps(self._sys_path),
                                                  *map(str, passed), str(lifeline.parent_for_tie() or "")],
                                  dict(os.environ))
        finally:
            os.set_inheritable(err.fileno(), False)
            os.close(plan_r)
            os.close(result_w)
        return _Child(pid, plan_w, result_r, err, steps=steps)

    def _add(self, i: int, step: dict[str, Any]) -> tuple[int, int]:
        while len(self._children) <= i:  # a package the start did not know of (not in the matrix)
            self._spawn()
        c = self._children[i]
        c.steps.append(step)
        return i, len(c.steps) - 1

    @staticmethod
    def _resolve_step(read: transformers.StaticRead, d: transformers.Decorated) -> dict[str, Any]:
        return {"kind": "resolve", "dotted": read.dotted, "submodule_fallback": read.submodule_fallback,
                "decorated": dataclasses.asdict(d)}

    def plan_static(self, read: transformers.StaticRead, functions: tuple[str, ...]) -> None:
        """The decorator regime read from source: each decorator resolved in the child of its package, then each
        package probed, then `why_torch`'s checks, package by package (the order of doctor's old sequence)."""
        k = max(1, len(self._children))
        self._owner = {n: i % k for i, n in enumerate(self.installed)}
        for d in read.decorated:
            if d.package not in self._owner and environment._safe_find(d.package.split(".")[0]):
                self._owner[d.package] = 0
            if d.package in self._owner:
                self._resolve_at.append(self._add(self._owner[d.package], self._resolve_step(read, d)))
            else:
                self._resolve_at.append(None)  # not installed: its import fails at once, in any process
        for n in self.installed:
            self._probe_at[n] = self._add(self._owner[n], {"kind": "probe", "name": n})
        fns = list(transformers.bindings_from_static(read, functions, [None] * len(read.decorated),
                                                        m=self._m).bindings)
        for i in sorted(set(self._owner.values())):
            self._attrs_at[i] = self._add(i, {"kind": "attrs", "functions": fns})

    def plan_sequence(self, read: transformers.StaticRead | None, module: str, functions: tuple[str, ...],
                      exacts: int) -> None:
        """One child runs doctor's old sequence: the static resolutions (if any), `exacts` imports of the
        modeling module (bind_exact), every probe, then `why_torch`'s checks."""
        self._owner = {n: 0 for n in self.installed}
        if read is not None:
            self._resolve_at = [self._add(0, self._resolve_step(read, d)) for d in read.decorated]
        self._exact_dotted = f"transformers.models.{module}.modeling_{module}"
        self._exact_at = [self._add(0, {"kind": "exact", "module": module, "functions": list(functions)})
                          for _ in range(exacts)]
        for n in self.installed:
            self._probe_at[n] = self._add(0, {"kind": "probe", "name": n})
        self._attrs_at[0] = self._add(0, {"kind": "attrs", "functions": list(functions),
                                          "discovered_from": [at[1] for at in self._exact_at]})

    def plan_packages(self) -> None:
        """A report without a model (or for a model this transformers lacks): every installed package probed."""
        k = max(1, len(self._children))
        for i, n in enumerate(self.installed):
            self._probe_at[n] = self._add(i % k, {"kind": "probe", "name": n})

    def send(self) -> None:
        """Hand each child its steps (children without steps end at once). With a stored proof: its answers
        when its steps are these, else fresh interpreters prove them."""
        if self._stored is not None:
            stored = self._stored["children"]
            if json.loads(json.dumps([c.steps for c in self._children])) == [sc["steps"] for sc in stored]:
                for c, sc in zip(self._children, stored, strict=True):
                    c.results = sc["results"]
                self.source = "cache"
                self._joined = True
                return
            for i, c in enumerate(self._children):
                self._children[i] = self._spawn_fresh(c.steps)
            self._stored = None
        for c in self._children:
            try:
                os.write(c.plan_fd, (json.dumps(c.steps) + "\n").encode())  # small: fits the pipe's buffer
            except OSError as exc:  # the child died already: join() reports it
                c.failure = f"ImportCrash: {type(exc).__name__}: {exc}"
            os.close(c.plan_fd)
            c.plan_fd = -1

    def join(self) -> None:
        """Wait for every child (bounded), read its results or say why there are none."""
        if self._joined:
            return
        self._joined = True
        timeout = import_timeout()
        deadline = time.monotonic() + timeout
        for c in self._children:
            with working("doctor: proving which kernel packages import and what transformers binds"):
                data = self._read(c.result_fd, deadline)  # the children exist: a progress thread is safe now
            os.close(c.result_fd)
            c.result_fd = -1
            if data is None:
                self._kill(c)
                c.failure = (f"TimeoutError: did not finish within {timeout:g} s (KERNELCHECK_IMPORT_TIMEOUT)"
                             f"{self._last_step(c)}")
                continue
            _, c.status = os.waitpid(c.pid, 0)
            if os.waitstatus_to_exitcode(c.status) == 0:
                try:
                    c.results = json.loads(data)
                    continue
                except ValueError:
                    pass
            code = os.waitstatus_to_exitcode(c.status)
            how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
            c.failure = c.failure or (f"ImportCrash: the Python process importing it {how}{self._last_step(c)}"
                                      f"{self._stderr_tail(c)}")

    @staticmethod
    def _read(fd: int, deadline: float) -> bytes | None:
        """Everything from `fd` until EOF, None if the deadline passes first."""
        chunks: list[bytes] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    @staticmethod
    def _kill(c: _Child) -> None:
        if c.status is None and c.pid > 0:
            try:
                os.kill(c.pid, 9)
            except ProcessLookupError:
                pass
            _, c.status = os.waitpid(c.pid, 0)

    @staticmethod
    def _last_step(c: _Child) -> str:
        if c.stderr is None:
            return ""
        c.stderr.seek(0)
        steps = [ln for ln in c.stderr.read().splitlines() if ln.startswith("kernelcheck-step ")]
        if not steps:
            return ""
        step = json.loads(steps[-1].split(" ", 1)[1])
        what = step.get("name") or step.get("module") or (step.get("decorated") or {}).get("package") or ""
        return f" while running {step['kind']} {what}".rstrip()

    @staticmethod
    def _stderr_tail(c: _Child) -> str:
        if c.stderr is None:
            return ""
        c.stderr.seek(0)
        lines = [ln for ln in c.stderr.read().splitlines() if ln.strip() and not ln.startswith("kernelcheck-step ")]
        return (": " + lines[-1].strip()[:300]) if lines else ""

    def close(self) -> None:
        """End children still running (doctor stopped early: bad input) and free their pipes and files."""
        for c in self._children:
            for fd in (c.plan_fd, c.result_fd):
                if fd >= 0:
                    os.close(fd)
            c.plan_fd = c.result_fd = -1
            self._kill(c)
            if c.stderr is not None:
                c.stderr.close()

    def annotate(self, report: Report) -> None:
        """Say in `report` where the import answers came from (JSON `import_proof`; a short info finding on a
        hit) and store a complete, successful proof for the next run."""
        if self._fingerprint is None:  # cache off (--no-cache, KERNELCHECK_IMPORT_CACHE=0)
            report.import_proof = ImportProof("proven", "off")
            return
        if self.source == "cache" and self._stored is not None:
            file, at = self._stored["file"], self._stored["proven_at"]
            # text: a `cache:` note (report/text.py); "baked": made when the image was built (KERNELCHECK_PROOF_DIR)
            report.import_proof = ImportProof("cache", "baked" if self._stored.get("baked") else "hit", file, at)
            return
        # complete: every child with steps answered them all (none with steps: nothing here imports anything)
        done = all((c.results is not None and len(c.results) == len(c.steps)) or not c.steps
                   for c in self._children)
        children = [{"steps": c.steps, "results": c.results or []} for c in self._children] if done else []
        stored = (proofcache.store(self._key, self._fingerprint, children)
                  if done and proofcache.cacheable(children) else None)
        report.import_proof = ImportProof("proven", "stored" if stored else "not stored",
                                          stored[0] if stored else None, stored[1] if stored else None)

    def _result(self, at: tuple[int, int]) -> tuple[Any, str | None]:
        self.join()
        c = self._children[at[0]]
        if c.results is not None and at[1] < len(c.results):
            return c.results[at[1]], None
        return None, c.failure or "ImportCrash: no answer"

    # readers ----------------------------------------------------------------------------------------------

    def packages(self) -> dict[str, environment.PackageState]:
        """Every kernel package's state, in matrix order, as with_packages gives it."""
        out: dict[str, environment.PackageState] = {}
        for n, absent in self._absent.items():
            if absent is not None:
                out[n] = absent
                continue
            res, failure = self._result(self._probe_at[n]) if n in self._probe_at else (None, "not probed")
            if res is not None:
                out[n] = environment.PackageState(**res)
            else:
                info = self._m.packages[n]
                version = dist = None
                for d in info.distributions:
                    version = environment.dist_version(d)
                    if version:
                        dist = d
                        break
                out[n] = environment.PackageState(n, installed=True, version=version, distribution=dist,
                                                      imports=False, error=failure)
        return out

    def resolved(self, read: transformers.StaticRead) -> list[str | None]:
        """What transformers takes for each of read.decorated (None: the torch function)."""
        out = [None if at is None else self._result(at)[0] for at in self._resolve_at]
        if len(out) != len(read.decorated):
            raise RuntimeError("import plan and static reading disagree")
        return out

    def exact(self, i: int) -> transformers.BindingResult:
        """The i-th bind_exact of plan_sequence."""
        res, failure = self._result(self._exact_at[i])
        if res is None:
            return transformers.BindingResult(transformers.detect_regime(), self._exact_dotted, {},
                                              module_error=failure)
        return transformers.BindingResult(
            res["regime"], res["module"], {k: transformers.Binding(**v) for k, v in res["bindings"].items()},
            res["module_error"], tuple(res["discovered"]))

    def attr(self, module: str, fn: str, package: str) -> dict[str, Any]:
        """{"has": bool} or {"error": text}: `import info.module; hasattr(fn)` in the child that imported
        `package` (asked only when that package imported there)."""
        at = self._attrs_at.get(self._owner.get(package, -1))
        if at is None:
            return {"error": "ImportCrash: not checked"}
        res, failure = self._result(at)
        if res is None or fn not in res:
            return {"error": failure or "ImportCrash: not checked"}
        return dict(res[fn])
