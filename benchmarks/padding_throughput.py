"""`kernelcheck padding` throughput on a plain lengths file: the old per-line path against the vectorized one.

    python benchmarks/padding_throughput.py [--mb 256] [--old-mb 8] [--rule budget:8192]

Writes a lengths file (log-normal lengths, median ~650 tokens, capped at 32768: about 5 bytes a line, like the
2 GiB / 390M-lengths file of issue 26), then runs, each in a fresh process:
- old: one Python step per line (int(line), then waste.measure per example: what padding did before), on the
  first --old-mb of the file (it is ~1 MB/s: the whole file would take minutes);
- new: `python -m kernelcheck padding FILE --json`, the whole file.
Prints MB/s of each (wall clock and CPU time: on a shared machine CPU time is the steadier number), the ratio,
each process's peak RSS, and whether both agree on the prefix. Exit 0 when the new path reaches 50 MB/s of CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_MB_S = 50.0


def _write(path: Path, mb: int) -> None:
    import numpy as np

    rng = np.random.default_rng(26)
    with path.open("w") as fh:
        while fh.tell() < mb * 1_000_000:
            a = np.clip(rng.lognormal(6.5, 1.0, 1_000_000).astype(np.int64), 1, 32768)
            fh.write("\n".join(map(str, a.tolist())) + "\n")


def _old(path: str, rule: str) -> None:
    """The pre-issue-26 path: a Python step per line and per example."""
    sys.path.insert(0, str(REPO))
    from kernelcheck.padding import waste

    def lines():
        with open(path, "rb") as fh:
            for raw in fh:
                s = raw.strip()
                if s:
                    yield int(s)

    print(json.dumps(waste.as_dict(waste.measure(lines(), waste.Rule.parse(rule)))))


def _run(cmd: list[str]) -> tuple[float, float, float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{cmd} exited {res.returncode}: {res.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = json.loads(res.stdout)
    return wall, cpu, after.ru_maxrss / 1024, out.get("padding", out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--old-mb", type=int, default=8)
    ap.add_argument("--rule", default="budget:8192")
    ap.add_argument("--old", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.old:
        _old(args.old, args.rule)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp, "lengths.txt"), Path(tmp, "prefix.txt")
        _write(big, args.mb)
        with big.open("rb") as src:
            head = src.read(args.old_mb * 1_000_000)
        small.write_bytes(head[:head.rfind(b"\n") + 1])
        size, small_size = big.stat().st_size / 1e6, small.stat().st_size / 1e6
        new_cmd = [sys.executable, "-m", "kernelcheck", "padding", "--batching", args.rule, "--json"]
        ow, oc, orss, old = _run([sys.executable, __file__, "--old", str(small), "--rule", args.rule])
        _, _, _, new_small = _run([*new_cmd, str(small)])
        nw, nc, nrss, _ = _run([*new_cmd, str(big)])
    print(f"{'path':<6} {'MB':>7} {'wall s':>8} {'cpu s':>7} {'MB/s wall':>10} {'MB/s cpu':>9} {'peak RSS':>9}")
    print(f"{'old':<6} {small_size:>7.0f} {ow:>8.1f} {oc:>7.1f} {small_size / ow:>10.1f} {small_size / oc:>9.1f} "
          f"{orss:>7.0f}MB")
    print(f"{'new':<6} {size:>7.0f} {nw:>8.1f} {nc:>7.1f} {size / nw:>10.1f} {size / nc:>9.1f} {nrss:>7.0f}MB")
    ratio = (size / nc) / (small_size / oc)
    same = old == new_small
    print(f"new / old (MB/s of CPU time): {ratio:.0f}x; same numbers on the {small_size:.0f} MB prefix: {same}; "
          f"load average {os.getloadavg()[0]:.1f}")
    return 0 if same and size / nc >= TARGET_MB_S else 1


if __name__ == "__main__":
    sys.exit(main())
