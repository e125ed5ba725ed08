#!/usr/bin/env python3
"""Cost of `kernelcheck verify --shape tiny`: a cold Triton cache against a warm one.

Runs verify twice in fresh processes with the same TRITON_CACHE_DIR: first with the folder empty
(cold: every fla kernel is compiled and autotuned), then again (warm). Reports verify's own timing,
which excludes the first import (torch, transformers, the modeling module and the kernel packages):
`excluding_import_s` = total - static phase. Targets (tiny shape on an H200): cold under 60 s,
warm under 15 s.

    python3 benchmarks/verify_cost.py --model qwen3.8-27b --mode infer --out cost.json
    python3 benchmarks/verify_cost.py --cache-dir /tmp/kc-triton   # keep the cache for later runs

The cache folder is emptied first unless --keep-cache is given; it is never under $OUT (a Triton cache
holds thousands of files and must not travel back).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"cold": 60.0, "warm": 15.0}


def entries(path: Path) -> int:
    try:
        return sum(1 for p in path.iterdir() if p.is_dir())
    except OSError:
        return 0


def run_once(label: str, args: list[str], cache: Path) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    before = entries(cache)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "verify", *args, "--json"], capture_output=True,
                         text=True, env=env)
    wall = time.perf_counter() - t0
    try:
        rep = json.loads(res.stdout)
    except json.JSONDecodeError:
        print(f"[{label}] verify did not print JSON (exit {res.returncode}):\n{res.stderr[-3000:]}", file=sys.stderr)
        return {"label": label, "exit_code": res.returncode, "wall_s": round(wall, 2), "error": res.stderr[-2000:]}
    live = rep.get("live") or {}
    t = live.get("timing") or {}
    return {
        "label": label, "exit_code": res.returncode, "verdict": rep.get("verdict"), "wall_s": round(wall, 2),
        "import_s": t.get("static_s"), "excluding_import_s": t.get("excluding_import_s"),
        "first_pass_s": t.get("first_pass_s"), "cache_entries_before": before, "cache_entries_after": entries(cache),
        "device": live.get("device"),
        "fast_functions": live.get("fast_functions"),
        "functions": {f["name"]: f["status"] for f in rep.get("functions", [])},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3.8-27b")
    ap.add_argument("--mode", default="infer", choices=["infer", "train"])
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--cache-dir", default=None, help="Triton cache folder to use (default: a new temp folder)")
    ap.add_argument("--keep-cache", action="store_true", help="do not empty the cache folder first (warm start)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args()
    cache = Path(a.cache_dir) if a.cache_dir else Path(tempfile.mkdtemp(prefix="kc-triton-cache-"))
    if cache.exists() and not a.keep_cache:
        shutil.rmtree(cache)
    cache.mkdir(parents=True, exist_ok=True)
    args = ["--model", a.model, "--shape", "tiny", "--mode", a.mode]
    if a.tokens:
        args += ["--tokens", str(a.tokens)]
    cold = run_once("cold" if not a.keep_cache else "start", args, cache)
    warm = run_once("warm", args, cache)
    print(f"verify --shape tiny --mode {a.mode} ({a.model}); Triton cache {cache}")
    print(f"{'':24}{'cold':>12}{'warm':>12}{'ratio':>10}")
    for key in ("excluding_import_s", "first_pass_s", "import_s", "wall_s"):
        c, w = cold.get(key), warm.get(key)
        ratio = f"{c / w:.1f}x" if isinstance(c, (int, float)) and isinstance(w, (int, float)) and w else "-"
        print(f"{key:<24}{c if c is not None else '-':>12}{w if w is not None else '-':>12}{ratio:>10}")
    after = "cache_entries_after"
    print(f"{'cache entries after':<24}{cold.get(after, '-'):>12}{warm.get(after, '-'):>12}")
    ok = True
    for label, res in (("cold", cold), ("warm", warm)):
        v = res.get("excluding_import_s")
        hit = isinstance(v, (int, float)) and v < TARGETS[label]
        ok &= hit
        print(f"target {label}: excluding import < {TARGETS[label]:.0f} s: {'met' if hit else 'NOT met'} ({v} s)")
    print(f"verdicts: cold {cold.get('verdict')} (exit {cold.get('exit_code')}), warm {warm.get('verdict')} "
          f"(exit {warm.get('exit_code')}); device {cold.get('device')}; fast: {cold.get('fast_functions')}")
    if a.out:
        Path(a.out).write_text(json.dumps({"cold": cold, "warm": warm, "targets_s": TARGETS, "cache_dir": str(cache),
                                           "targets_met": ok}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
