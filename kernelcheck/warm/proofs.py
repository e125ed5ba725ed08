"""The gate's own proofs, made into the folder `kernelcheck warm` bakes, so that the gate on a node of the image does
not prove again what the build proved.

A gate's first steps are doctor's import proofs (doctor/proofcache.py) and, on a GPU, the JIT probes
(doctor/jitprobe.py); each is kept under a key of everything that can change its answer. `bake` runs the gate's
doctor (`doctor --model M --mode X`, with `--jit-probe` on a GPU) in a child process under the environment the job
will have: this process's, plus the variables `warm --print-env` prints (the JIT caches in DIR, and
KERNELCHECK_PROOF_DIR=DIR/kernelcheck), with KERNELCHECK_HOME pointed at DIR/kernelcheck too so that the child stores
its proofs there (neither variable is in a key). The child is started the way this process was (`python -m
kernelcheck` in the same folder, or the same `kernelcheck` script), so that the first entry of its sys.path, which
is in the import key, is the one a job started the same way has.

On the node, the job's KERNELCHECK_PROOF_DIR leads doctor and verify to them, read only, after KERNELCHECK_HOME: a key
found there is reported as proven at bake time; a key that differs is proven afresh on the node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from kernelcheck.core import lifeline
from kernelcheck.integrations import jit_caches

TIMEOUT_S = 900.0
_PROBE_IDS = ("jit-probe-passed", "jit-probe-failed", "jit-run-unchecked")


def proof_dir(cache_dir: str) -> str:
    """DIR/kernelcheck: where the proofs of a baked folder live (KERNELCHECK_PROOF_DIR of `warm --print-env`)."""
    return os.path.join(os.path.abspath(cache_dir), jit_caches.OWN[1])


def job_env(cache_dir: str, variables: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's environment (`environ`, default this process's, plus the printed `variables`), with KERNELCHECK_HOME
    in the folder's proof subfolder, where the child stores what it proves."""
    env = {**(os.environ if environ is None else environ), **variables}
    env["KERNELCHECK_HOME"] = proof_dir(cache_dir)
    return env


def self_command(argv0: str | None = None) -> list[str]:
    """kernelcheck started as this process was: the same `kernelcheck` script (sys.path[0] its folder), else
    `python -m kernelcheck` (sys.path[0] the current folder)."""
    arg = sys.argv[0] if argv0 is None else argv0
    if os.path.basename(arg).startswith("kernelcheck") and os.path.isfile(arg) and not arg.endswith(".py"):
        return [sys.executable, arg]
    return [sys.executable, "-m", "kernelcheck"]


def bake(spec: Mapping[str, Any], env: Mapping[str, str], gpu: bool, timeout: float = TIMEOUT_S,
         cwd: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The gate's doctor (and its JIT probes on a GPU) in a child with `env` (`job_env`): {"static": {"ok",
    "seconds", "import_proof"}, and per JIT-probe finding id {"ok", "error"}}."""
    cmd = [*(command or self_command()), "doctor", "--model", str(spec["model"]), "--mode", str(spec["mode"]),
           *(["--jit-probe"] if gpu else []), "--json"]
    t0 = time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=lifeline.preexec(), timeout=timeout,
                             env=dict(env), cwd=cwd)
        report = json.loads(res.stdout)
    except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
        return {"static": {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}}
    if not isinstance(report, dict):
        return {"static": {"ok": False, "error": f"doctor printed no report (exit {res.returncode})"}}
    proof = report.get("import_proof") or {}
    out: dict[str, Any] = {"static": {"ok": True, "seconds": round(time.perf_counter() - t0, 2),
                                      "import_proof": proof.get("cache")}}
    for f in report.get("findings", []):
        if f.get("id") in _PROBE_IDS:
            out[f["id"]] = {"ok": f["id"] == "jit-probe-passed", "error": None if f["id"] == "jit-probe-passed"
                            else f.get("message", "")[:300]}
    return out
