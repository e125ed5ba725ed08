"""Wall time of `kernelcheck doctor --model qwen3.8-27b`, cold (import proofs made afresh: --no-cache) and warm
(the proof cache hit: doctor/proofcache.py), against `transformers env` and `python -m torch.utils.collect_env`,
side by side in one run (interleaved, median of N). Target: doctor no slower than `transformers env`.

    python benchmarks/doctor_speed.py [--runs 5] [--site DIR ...] [--mode train|infer]

--site DIR puts DIR first on PYTHONPATH for every command (a `pip install --target` folder with fla-core,
triton, ...), so they see the same environment. The doctor measured is this checkout's; its cache lives in a
temporary KERNELCHECK_HOME, filled by one doctor run before the timed ones (and checked to be a hit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--site", action="append", default=[], help="folder to put first on PYTHONPATH (repeatable)")
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    args = ap.parse_args()
    doctor = [sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b", "--mode", args.mode]
    commands = {
        "kernelcheck doctor (cold: --no-cache)": [*doctor, "--no-cache"],
        "kernelcheck doctor (warm: cache hit)": doctor,
        "transformers env": [os.path.join(os.path.dirname(sys.executable), "transformers"), "env"],
        "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
    }
    path = [str(REPO), *args.site, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]
    home = tempfile.mkdtemp(prefix="kc-doctor-speed-")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(path), KERNELCHECK_HOME=home)
    env.pop("KERNELCHECK_IMPORT_CACHE", None)
    for warm in (False, True):  # fill the cache, then check that the warm command hits it
        res = subprocess.run([*doctor, "--json"], capture_output=True, env=env, cwd=REPO)
        proof = json.loads(res.stdout or b"{}").get("import_proof") or {}
        if warm and proof.get("source") != "cache":
            sys.exit(f"the warm doctor did not hit the cache: {proof} (exit {res.returncode}; "
                     f"{res.stderr.decode(errors='replace')[-1000:]})")
    times: dict[str, list[float]] = {k: [] for k in commands}
    for i in range(args.runs):  # interleaved so that machine noise hits every command alike
        for name, cmd in commands.items():
            t = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, env=env, cwd=REPO)
            times[name].append(time.perf_counter() - t)
            print(f"  run {i + 1}/{args.runs}: {name}: {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
            if res.returncode not in (0, 3, 4):
                sys.exit(f"{name} exited {res.returncode}: {res.stderr.decode(errors='replace')[-2000:]}")
    ref = statistics.median(times["transformers env"])
    print(f"sites: {', '.join(args.site) or '(none)'}; {args.runs} runs; {os.cpu_count()} CPUs")
    print(f"{'command':<40} {'median s':>9} {'min s':>7}  vs transformers env")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<40} {med:9.2f} {min(ts):7.2f}  {med / ref:5.2f}x")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
