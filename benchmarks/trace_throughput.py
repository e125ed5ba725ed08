"""Throughput and peak memory of `kernelcheck trace`'s whole analysis on a large trace, side by side with
plain `json.load` of the same file (and orjson / Holistic Trace Analysis when a Python that has them is given).

    python benchmarks/trace_throughput.py                          # ~100 MB plain + its gzip
    python benchmarks/trace_throughput.py --size-mb 400 --other-python /tmp/bvenv/bin/python

The large trace is built from a REAL trace recorded here: the tiny Qwen3.5 (Gated DeltaNet + attention)
training step under torch.profiler for a few ProfilerSteps; its events are then repeated with shifted
timestamps and renumbered steps, in torch's own event layout, until the file reaches --size-mb. Each
contender runs in its own subprocess so its peak RSS (ru_maxrss) is its own; the table shows MB/s of
uncompressed JSON per CPU second (the machine may be shared; wall time is shown too), peak RSS above an
interpreter that only did the imports, and the ratio to json.load. orjson and HTA are never project dependencies: pass
--other-python with a throwaway venv that has them (pip install orjson HolisticTraceAnalysis).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RECORD = r"""
import torch, sys
from transformers import AutoModelForCausalLM, Qwen3_5TextConfig
from torch.profiler import ProfilerActivity, profile, schedule
cfg = Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"])
model = AutoModelForCausalLM.from_config(cfg)
x = torch.randint(0, 128, (1, 64))
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=4, repeat=1),
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for _ in range(5):
        model(x, labels=x).loss.backward()
        prof.step()
"""

# Each contender: imports (SETUP), then WORK reads the file and touches every event, as any analysis must.
# Time and peak RSS are measured inside the child, after the imports.
CONTENDERS = {
    "kernelcheck analyze_file": ("import sys; sys.path.insert(0, {repo!r}); from kernelcheck import trace", """
a = trace.analyze_file(path)
result = (a.events, a.summary.cpu_ops, len(a.steps))
"""),
    "json.load": ("import json, gzip", """
with (gzip.open if path.endswith(".gz") else open)(path, "rb") as fh:
    d = json.load(fh)
result = (len(d["traceEvents"]), sum(1 for e in d["traceEvents"] if e.get("cat") == "cpu_op"), 0)
"""),
    "orjson.loads": ("import orjson, gzip", """
with (gzip.open if path.endswith(".gz") else open)(path, "rb") as fh:
    d = orjson.loads(fh.read())
result = (len(d["traceEvents"]), sum(1 for e in d["traceEvents"] if e.get("cat") == "cpu_op"), 0)
"""),
    "HTA TraceAnalysis": ("import os, shutil, tempfile, logging; logging.disable(logging.WARNING); "
                          "from hta.trace_analysis import TraceAnalysis", """
d = tempfile.mkdtemp()
shutil.copy(path, os.path.join(d, "rank-0.pt.trace.json" + (".gz" if path.endswith(".gz") else "")))
ta = TraceAnalysis(trace_dir=d)
df = ta.t.get_trace(0)
result = (len(df), -1, 0)
"""),
}

CHILD = """
import resource, sys, time, json
{setup}
path = sys.argv[1]
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t, c = time.perf_counter(), time.process_time()
{work}
dt, dc = time.perf_counter() - t, time.process_time() - c
# children too: HTA parses ranks in worker processes
rss1 = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({{"s": dt, "cpu_s": dc, "rss_mb": (rss1 - rss0) / 1024, "out": " ".join(map(str, result))}}))
"""


def build_trace(path: Path, size_mb: int) -> None:
    """Record a real trace, then repeat its events to `size_mb` MB in torch's layout."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "real.json"
        print("recording a real trace of the tiny Qwen3.5 training step ...", flush=True)
        subprocess.run([sys.executable, "-c", RECORD, str(src)], check=True, capture_output=True, timeout=900)
        with open(src) as fh:
            doc = json.load(fh)
    events = doc.pop("traceEvents")
    steps = [e for e in events
             if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    t0 = min(e["ts"] for e in events if "ts" in e and isinstance(e["ts"], (int, float)))
    t1 = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e and isinstance(e["ts"], (int, float)))
    period = (t1 - t0) + 1000.0
    head = json.dumps({k: v for k, v in doc.items() if k != "traceName"}, indent=2)[:-2]
    target = size_mb * 1_000_000
    written = 0
    rep = 0
    with open(path, "w") as out:
        out.write(head + ',\n  "traceEvents": [\n')
        first = True
        while written < target:
            shift = rep * period
            for e in events:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = round(e2["ts"] + shift, 3)
                if e2.get("cat") == "user_annotation" and e2.get("name", "").startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{rep * len(steps) + int(e2['name'].split('#')[1])}"
                s = ("" if first else ",\n") + "  " + json.dumps(e2, indent=4).replace("\n", "\n  ")
                first = False
                out.write(s)
                written += len(s)
            rep += 1
        out.write('\n  ],\n  "traceName": "' + path.name + '"\n}\n')
    print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {rep} copies of {len(events):,} real events, "
          f"{rep * len(steps)} ProfilerSteps)", flush=True)


def run(python: str, name: str, path: Path, repeat: int) -> dict:
    """Best of `repeat` runs, each in a fresh process (peak RSS: the largest seen)."""
    setup, work = CONTENDERS[name]
    code = CHILD.format(setup=setup.format(repo=str(REPO)), work=work)
    best: dict = {}
    for _ in range(repeat):
        r = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            err = r.stderr.strip().splitlines()
            return {"rc": r.returncode, "err": err[-1] if err else str(r.returncode)}
        d = json.loads(r.stdout.strip().splitlines()[-1])
        if not best or d["cpu_s"] < best["cpu_s"]:
            best = {**d, "rss_mb": max(d["rss_mb"], best.get("rss_mb", 0.0))}
    best["rc"] = 0
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--trace", type=Path, default=None, help="use this trace instead of building one")
    ap.add_argument("--other-python", default=None,
                    help="a Python with orjson and/or HolisticTraceAnalysis installed (a throwaway venv)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender; the fastest counts (default 3)")
    ap.add_argument("--keep", type=Path, default=None, help="folder to keep the built traces in")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kc-trace-bench-")) if a.keep is None else a.keep
    work.mkdir(parents=True, exist_ok=True)
    if a.trace:
        plain = a.trace
    else:
        plain = work / f"big-{a.size_mb}mb.json"
        if not plain.exists():
            build_trace(plain, a.size_mb)
    gz = Path(str(plain) + ".gz") if not str(plain).endswith(".gz") else None
    if gz and not gz.exists():
        with open(plain, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    files = [plain] + ([gz] if gz else [])
    contenders = [(sys.executable, "kernelcheck analyze_file"), (sys.executable, "json.load")]
    if a.other_python:
        for name, mod in (("orjson.loads", "orjson"), ("HTA TraceAnalysis", "hta")):
            ok = subprocess.run([a.other_python, "-c", f"import {mod}"], capture_output=True).returncode == 0
            if ok:
                contenders.append((a.other_python, name))
            else:
                print(f"{name}: not importable by {a.other_python}; skipped")
    print(f"python {sys.version.split()[0]} · {os.cpu_count()} CPUs")
    print(f"{'file':<26} {'contender':<26} {'wall s':>7} {'CPU s':>7} {'MB/s':>8} {'peak +RSS MB':>12} "
          f"{'vs json.load':>13}  events, cpu_ops, steps")
    for f in files:
        raw_mb = plain.stat().st_size / 1e6  # throughput against the uncompressed JSON, also for .gz
        results = {name: run(py, name, f, a.repeat) for py, name in contenders}
        ref = results["json.load"]["cpu_s"]
        for py, name in contenders:  # noqa: B007 - the loop unpacks the pair; only the name is used
            r = results[name]
            label = f"{f.name} ({f.stat().st_size / 1e6:.0f} MB)"
            if r["rc"]:
                print(f"{label:<26} {name:<26} FAILED: {r['err']}")
                continue
            print(f"{label:<26} {name:<26} {r['s']:>7.2f} {r['cpu_s']:>7.2f} {raw_mb / r['cpu_s']:>8.1f} "
                  f"{r['rss_mb']:>12.0f} {ref / r['cpu_s']:>12.2f}x  {r['out']}")
    print("MB/s: uncompressed JSON per CPU second (CPU time, not wall: steady on a shared machine); "
          "'vs json.load' > 1: faster than json.load on the same file. HTA's CPU time excludes its worker "
          "processes; see its wall time.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
