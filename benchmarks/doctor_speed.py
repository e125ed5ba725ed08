"""Wall time of `kernelcheck doctor --model qwen3.8-27b` against `python -m torch.utils.collect_env`
and `transformers env`, side by side in one run (interleaved, median of N). Target: doctor no slower
than `transformers env`.

    python benchmarks/doctor_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "kernelcheck doctor --model qwen3.8-27b": [sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b"],
    "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
    "transformers env": [os.path.join(os.path.dirname(sys.executable), "transformers"), "env"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for _ in range(args.runs):  # interleaved so that machine noise hits every command alike
        for name, cmd in COMMANDS.items():
            t = time.perf_counter()
            subprocess.run(cmd, capture_output=True, env=env)
            times[name].append(time.perf_counter() - t)
    ref = statistics.median(times["transformers env"])
    print(f"{'command':<42} {'median s':>9} {'min s':>7}  vs transformers env")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<42} {med:9.2f} {min(ts):7.2f}  {med / ref:5.2f}x")


if __name__ == "__main__":
    main()
