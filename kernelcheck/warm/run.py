"""`kernelcheck warm`: compile the job's fast path into one folder an image can ship, and record its keys.

Two child processes (warm/child.py), each with the JIT variables pointed into DIR in its own environment (this
process's and the user's stay as they are): the first runs the model's real layers at each shape, cold then again
(what compiles, and the seconds it costs); the second is a fresh process on the now warm folder, the same steps once,
which measures the hit a job will get (TileLang's key depends on the process's build history, tilelang#2662: a hit
is measured, never assumed). What each JIT added to DIR, the key parts it was compiled under (this node's, read by
integrations/jit_caches.py) and the times go into DIR's manifest (doctor/cacheproof.py), which the cache proof reads.
Between the two, the gate's own proofs (warm/proofs.py): its doctor, and on a GPU its JIT probes, under the job's
variables, stored in DIR/kernelcheck, which the job's KERNELCHECK_PROOF_DIR names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelcheck.core import lifeline
from kernelcheck.core.errors import BadInput
from kernelcheck.doctor import cacheproof
from kernelcheck.integrations import jit_caches
from kernelcheck.report.progress import working
from kernelcheck.warm import proofs

CHILD_TIMEOUT_S = 3600.0
# timers of integrations/jit_caches.py -> the JIT whose folder they fill
_TIMER_JIT = {"triton": "triton", "triton-autotune": "triton", "tilelang": "tilelang"}


@dataclass
class WarmResult:
    """What a warm run did: the manifest it wrote (None when the run failed), the child's error, the env lines."""

    cache_dir: str
    manifest: cacheproof.Manifest | None
    env: list[str]
    device: str = "?"
    gpu: str | None = None
    error: str | None = None
    added: dict[str, dict[str, int]] = field(default_factory=dict)  # jit -> entries/bytes the first process added
    rechecked: dict[str, dict[str, int]] = field(default_factory=dict)  # ... the fresh process added
    notes: list[str] = field(default_factory=list)
    proofs: dict[str, Any] = field(default_factory=dict)  # the gate's proofs made into DIR/kernelcheck (proofs.bake)


def spec_of(model: str, mode: str, shapes: tuple[str, ...], tokens: int | None, with_compile: bool,
            packing: bool) -> dict[str, Any]:
    if tokens is not None and tokens < 1:
        raise BadInput(f"--tokens must be a positive number of tokens, not {tokens}.")
    bad = [s for s in shapes if s not in ("tiny", "full")]
    if bad or not shapes:
        raise BadInput(f"--shape takes tiny, full or tiny,full (comma-separated), not {','.join(shapes) or 'nothing'}.")
    return {"model": model, "mode": mode, "shapes": list(dict.fromkeys(shapes)), "tokens": tokens,
            "compile": with_compile, "packing": packing}


def run_child(spec: Mapping[str, Any], env: Mapping[str, str], timeout: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """warm/child.py in its own process with `env`; its JSON answer ({"error": ...} when it gave none)."""
    cmd = [sys.executable, "-m", "kernelcheck.warm.child", json.dumps(dict(spec))]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(env),
                             preexec_fn=lifeline.preexec())
    except subprocess.TimeoutExpired:
        return {"error": f"the run did not end in {timeout:.0f} s"}
    lines = [x for x in res.stdout.splitlines() if x.startswith("{")]
    if not lines:
        tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-4:])
        return {"error": f"the run exited {res.returncode} without an answer: {tail[:600]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def _diff(after: Mapping[str, Mapping[str, int]], before: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    return {j: {k: max(0, int(v) - int(before.get(j, {}).get(k, 0))) for k, v in a.items()} for j, a in after.items()}


def _seconds(timers: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, secs in dict(timers.get("seconds", {})).items():
        jit = _TIMER_JIT.get(name)
        if jit:
            out[jit] = round(out.get(jit, 0.0) + float(secs), 3)
    return out


def _probes(first: Mapping[str, Any], env: dict[str, str], say: Callable[[str], None],
            spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The gate's own first steps, in the folder too (warm/proofs.py): its doctor in a child process with the job's
    variables, storing the import proofs and, on a GPU (`--jit-probe`), the JIT probes' passes in DIR/kernelcheck,
    and the probe kernels in the JIT caches. {"static": {"ok", "seconds", "import_proof"}, finding id: {"ok"}}."""
    if spec is None:
        return {}
    gpu = str(first.get("device", "")).startswith("cuda")
    say("running the gate's static check" + (" and JIT probes" if gpu else "") + " into the folder (doctor"
        + (" --jit-probe)" if gpu else ")"))
    return proofs.bake(spec, env, gpu)


def warm(spec: Mapping[str, Any], cache_dir: str, table: Mapping[str, Any], version: str,
         say: Callable[[str], None], child: Callable[..., dict[str, Any]] = run_child,
         probe: Callable[..., dict[str, Any]] = _probes) -> WarmResult:
    """Warm `cache_dir` for `spec` and write its manifest. `child` runs warm/child.py, `probe` verify's JIT probes
    (tests pass stand-ins that write into the folders the environment names, as the JITs do)."""
    folder = os.path.abspath(cache_dir)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--cache-dir {cache_dir} cannot be created ({exc.strerror}).") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInput(f"--cache-dir {cache_dir} is not writable: the JITs could not store what they compile.")
    variables = jit_caches.env_for(folder, table, bool(spec.get("compile")), own=True)
    env = proofs.job_env(folder, variables)  # KERNELCHECK_HOME there too: the gate's proofs are stored in DIR
    lines = [f"{k}={v}" for k, v in variables.items()]
    before = jit_caches.inventory(folder, table, bool(spec.get("compile")))
    say(f"running {spec['model']} ({spec['mode']}, {', '.join(spec['shapes'])}) with every JIT writing into "
        f"{folder}: the first run of a cold cache can take minutes")
    def count() -> int:
        return sum(v["entries"] for v in jit_caches.inventory(folder, table).values())

    start = count()
    with working("kernelcheck warm: compiling", every=15.0,
                 detail=lambda: f"{count() - start:+d} cache entries so far"):
        first = child(spec, env)
    if first.get("error"):
        return WarmResult(folder, None, lines, error=str(first["error"]))
    probes = probe(first, env, say, spec)
    mid = jit_caches.inventory(folder, table, bool(spec.get("compile")))
    say("running the same steps in a fresh process on the warmed folder (measures the hit a job gets)")
    with working("kernelcheck warm: the fresh-process check", every=15.0):
        again = child({**spec, "repeat": False, "compile": False, "packing": False}, env)
    after = jit_caches.inventory(folder, table, bool(spec.get("compile")))
    added, rechecked = _diff(mid, before), _diff(after, mid)
    secs = _seconds(first.get("timers", {}))
    compiled = {j: {**added.get(j, {"entries": 0, "bytes": 0}), "seconds": secs.get(j),
                    "total_entries": mid.get(j, {}).get("entries", 0)} for j in mid}
    if "inductor" in compiled:
        compiled["inductor"]["seconds"] = round(sum(
            float(r.get("compile", {}).get("cold_s", 0.0)) - float(r.get("compile", {}).get("warm_s", 0.0))
            for r in first.get("shapes", {}).values()), 3) or None
    timing = {"shapes": first.get("shapes", {}), "packing_s": first.get("packing_s"),
              "probes_s": {j: p.get("seconds") for j, p in probes.items()},
              "recheck": {s: r.get("cold_s") for s, r in again.get("shapes", {}).items()},
              "recheck_error": again.get("error")}
    recheck = {} if again.get("error") else {j: {"entries_added": v.get("entries", 0)} for j, v in rechecked.items()}
    manifest = cacheproof.Manifest(
        model=str(spec["model"]), mode=str(spec["mode"]), shapes=list(spec["shapes"]),
        tokens={s: int(r.get("tokens", 0)) for s, r in first.get("shapes", {}).items()},
        compile=bool(spec.get("compile")), keys=dict(first.get("keys", {})), compiled=compiled, timing=timing,
        recheck=recheck, variables={k: os.path.relpath(v, folder) for k, v in variables.items()},
        kernelcheck=version)
    cacheproof.write(folder, manifest)
    notes = []
    if first.get("missing"):
        notes.append("compile time not attributed for: " + ", ".join(first["missing"]))
    if again.get("error"):
        notes.append(f"the fresh-process check failed: {again['error']}")
    notes += [f"the gate's {j} in the folder did not pass: {p.get('error')}" for j, p in probes.items()
              if not p.get("ok")]
    stored = probes.get("static", {}).get("import_proof")
    if stored not in (None, "stored", "hit"):
        notes.append(f"the gate's import proof was {stored} in the folder: the job's doctor proves it on the node")
    return WarmResult(folder, manifest, lines, str(first.get("device", "?")), first.get("gpu"), None, added,
                      rechecked, notes, probes)
