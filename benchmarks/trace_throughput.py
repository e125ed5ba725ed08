"""Throughput and peak memory of `kernelcheck trace FILE` side by side with
`python -c 'import json; json.load(open(FILE))'` on the same large GPU trace, each in its own process.

    python benchmarks/trace_throughput.py                    # builds a 270 MB GPU trace, 3 paired runs
    python benchmarks/trace_throughput.py --trace my.json    # or time a trace you have
    python benchmarks/trace_throughput.py --one-line         # the same events re-dumped on one JSON line
    python benchmarks/trace_throughput.py --budget           # also `trace --budget` beside `trace` alone

The large trace is built from a REAL trace recorded under torch.profiler on an H200
(tests/data/gpu/step-reference.json.gz: a Qwen3.5 training step on the torch reference path; CPU ops,
cuda_runtime/cuda_driver calls, kernels, gpu_memcpy/gpu_memset, "ac2g" and "fwdbwd" flow events, in the
layout torch writes). Its events are repeated, as text, with shifted timestamps, correlation ids, flow ids
and External ids, and renumbered ProfilerSteps, until the file reaches --size-mb; python_function events
(what `with_stack=True` adds) are written next to one CPU op in four, in the layout torch writes them.

Each command runs as a child process; its CPU time (user + sys) and peak RSS come from the kernel
(os.wait4's rusage), wall time from the clock. The trace is built in a process of its own (a child's peak RSS,
as Linux counts it, starts from its parent's: built here, it showed the builder's 480 MiB as kernelcheck's).
Runs alternate (kernelcheck, json.load, kernelcheck, ...) and the median of --repeat runs counts. MB/s is the
file's size per CPU second (steady on a shared machine; wall MB/s is printed too). The last line is the figure
the README quotes. With --one-line the trace is first re-dumped by json.dump (one line, json's separators: what
another tool writes after loading it), and the last line says "one-line" before its size. Each run's figures go to
stderr as it ends, so a long benchmark is never silent.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "data" / "gpu" / "step-reference.json.gz"

_TS = re.compile(r'"ts": (\d+(?:\.\d+)?)')
_CORR = re.compile(r'("correlation": |"id": |"External id": )(\d+)')
_STEP = re.compile(r"ProfilerStep#(\d+)")
_CPU_OP = re.compile(r'"cat": "cpu_op", "name": "[^"]*", "pid": (\d+), "tid": (\d+),\s*"ts": ([\d.]+), "dur": ([\d.]+)')
# frames a with_stack=True trace of a transformers training step holds (one in 40 is the torch reference path)
_FRAMES = ("torch/nn/modules/module.py(1784): _call_impl", "torch/nn/modules/module.py(1773): _wrapped_call_impl",
           "transformers/models/qwen3_5/modeling_qwen3_5.py(412): forward",
           "torch/nn/modules/linear.py(134): forward", "torch/nn/functional.py(2910): silu",
           "transformers/modeling_layers.py(94): __call__", "torch/autograd/graph.py(829): _engine_run_backward")
_REFERENCE_FRAME = "transformers/models/qwen3_5/modeling_qwen3_5.py(287): torch_chunk_gated_delta_rule"


def _python_function(pid: str, tid: str, ts: float, dur: float, pyid: int, name: str) -> str:
    return ('\n  {\n    "ph": "X", "cat": "python_function", "name": "' + name + '", "pid": ' + pid + ', "tid": '
            + tid + ',\n    "ts": ' + f"{ts:.3f}" + ', "dur": ' + f"{dur:.3f}" + ',\n    "args": {\n      '
            '"Python parent id": ' + str(pyid - 1) + ', "Python id": ' + str(pyid) + ', "Python thread": 0\n    }\n  }')


def build_trace(path: Path, size_mb: int, source: Path = SOURCE) -> None:
    """Repeat the recorded trace's events (as text, in torch's layout) until the file reaches `size_mb` MB."""
    text = gzip.decompress(source.read_bytes()).decode()
    start = text.index('"traceEvents": [') + len('"traceEvents": [')
    end = text.rindex("\n  ]")
    head, body, tail = text[:start], text[start:end], text[end:]
    events = body.strip().removeprefix("{").removesuffix("}").split("\n  },\n  {")
    events = ["\n  {" + e + "\n  }" for e in events]
    ts = [float(m.group(1)) for e in events for m in _TS.finditer(e)]
    period = round(max(ts) - min(ts) + 1000.0, 3)
    ids = max(int(m.group(2)) for e in events for m in _CORR.finditer(e)) + 1
    steps = len({m.group(1) for e in events for m in _STEP.finditer(e)})
    target = size_mb * 1_000_000
    written, rep, pyid, n = 0, 0, 0, 0
    with open(path, "w") as out:
        out.write(head)
        sep = ""
        while written < target:
            def ts_sub(m: re.Match[str], shift: float = rep * period) -> str:
                return f'"ts": {float(m.group(1)) + shift:.3f}'

            def id_sub(m: re.Match[str], add: int = rep * ids) -> str:
                return m.group(1) + str(int(m.group(2)) + add)

            def step_sub(m: re.Match[str], add: int = rep * steps) -> str:
                return f"ProfilerStep#{int(m.group(1)) + add}"

            chunk = []
            for i, e in enumerate(events):
                e2 = _CORR.sub(id_sub, _TS.sub(ts_sub, e)) if rep else e
                if rep and "ProfilerStep#" in e2:
                    e2 = _STEP.sub(step_sub, e2)
                chunk.append(sep + e2)
                sep = ","
                if i % 4 == 0 and (m := _CPU_OP.search(e2)):
                    pyid += 1
                    name = _REFERENCE_FRAME if pyid % 40 == 0 else _FRAMES[pyid % len(_FRAMES)]
                    chunk.append("," + _python_function(m.group(1), m.group(2), float(m.group(3)) - 0.5,
                                                        float(m.group(4)) + 1.0, pyid, name))
                n += 1
            s = "".join(chunk)
            out.write(s)
            written += len(s)
            rep += 1
        out.write(tail)
    print(f"built {path} ({path.stat().st_size / 1e6:.0f} MB): {rep} copies of the {len(events):,} events of "
          f"{source.name}, {rep * steps} ProfilerSteps, {pyid:,} python_function events", flush=True)


def measure(cmd: list[str], label: str = "") -> dict[str, float]:
    """Run `cmd` as a child; its wall s, CPU s (user + sys) and peak RSS (MiB) from the kernel."""
    print(f"  running {label or cmd[0]} ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if p.stderr:
        p.stderr.close()
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 3):  # trace exits 3 on a fallback signature, which this trace carries
        raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}): {err.strip()[-500:]}")
    got = {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024}
    print(f"  {label or cmd[0]}: {got['cpu']:.2f} CPU s, {wall:.2f} s wall, {got['rss']:.0f} MiB", file=sys.stderr,
          flush=True)
    return got


def report(a: argparse.Namespace, runs: dict[str, list[dict[str, float]]], mb: float, path: Path) -> None:
    """The medians of the paired runs; the last line is the figure the README quotes (tests read it)."""
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("wall", "cpu", "rss")} for k, v in runs.items()}
    print(f"python {sys.version.split()[0]} · {os.cpu_count()} CPUs · {path.name} ({mb:.0f} MB) · "
          f"median of {a.repeat} paired runs, each a fresh process")
    print(f"{'command':<20} {'CPU s':>7} {'MB/s CPU':>9} {'wall s':>7} {'MB/s wall':>10} {'peak RSS MiB':>13}")
    for k, m in med.items():
        print(f"{k:<20} {m['cpu']:>7.2f} {mb / m['cpu']:>9.1f} {m['wall']:>7.2f} {mb / m['wall']:>10.1f} "
              f"{m['rss']:>13.0f}")
    kc, js = med["kernelcheck trace"], med["json.load"]
    if a.budget:  # before the last line (the README's figure, which tests read from the end)
        bu = med["trace --budget"]
        print(f"budget {mb:.0f} MB: trace --budget {bu['cpu']:.2f} vs trace {kc['cpu']:.2f} CPU s = "
              f"{bu['cpu'] / kc['cpu']:.2f}x trace alone (wall {bu['wall'] / kc['wall']:.2f}x); "
              f"RSS {bu['rss']:.0f} vs {kc['rss']:.0f} MiB")
    kind = "one-line " if a.one_line else ""
    print(f"trace {kind}{mb:.0f} MB: {mb / kc['cpu']:.1f} vs {mb / js['cpu']:.1f} MB/s per CPU s = "
          f"{js['cpu'] / kc['cpu']:.2f}x json.load (wall {js['wall'] / kc['wall']:.2f}x); "
          f"RSS {kc['rss']:.0f} vs {js['rss']:.0f} MiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=270, help="size of the built trace (default 270)")
    ap.add_argument("--trace", type=Path, default=None, help="time this trace instead of building one")
    ap.add_argument("--repeat", type=int, default=3, help="paired runs; the median counts (default 3)")
    ap.add_argument("--keep", type=Path, default=None, help="folder to keep the built trace in (reused)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter for both commands")
    ap.add_argument("--build", type=Path, default=None, help="only build the trace at this path (--size-mb)")
    ap.add_argument("--one-line", action="store_true", help="time the trace re-dumped by json.dump on one line")
    ap.add_argument("--budget", action="store_true",
                    help="also time `trace --budget --model qwen3.8-27b --tokens 8192` beside `trace` alone")
    a = ap.parse_args()
    if a.build:
        build_trace(a.build, a.size_mb)
        return 0
    if a.trace:
        path = a.trace
    else:
        work = a.keep or Path(tempfile.mkdtemp(prefix="kc-trace-bench-"))
        work.mkdir(parents=True, exist_ok=True)
        path = work / f"gpu-{a.size_mb}mb.json"
        if not path.exists():  # in a child: a child's peak RSS, as the kernel counts it, starts from its parent's
            print(f"building a {a.size_mb} MB trace at {path} ...", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, __file__, "--build", str(path), "--size-mb", str(a.size_mb)], check=True)
    if a.one_line:
        one = path.with_name(path.name.removesuffix(".gz").removesuffix(".json") + "-one-line.json")
        if not one.exists():
            print(f"re-dumping {path.name} on one line with json.dump ...", file=sys.stderr, flush=True)
            opener = "gzip.open" if path.name.endswith(".gz") else "open"
            subprocess.run([sys.executable, "-c", f"import gzip, json, sys; json.dump(json.load({opener}(sys.argv[1], "
                            "'rt')), open(sys.argv[2], 'w'))", str(path), str(one)], check=True)
        path = one
    mb = path.stat().st_size / 1e6
    env_cmd = [a.python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from kernelcheck.cli.main import main; "
               "sys.argv = ['kernelcheck', 'trace', sys.argv[2]]; main()", str(REPO), str(path)]
    opener = "gzip.open" if path.name.endswith(".gz") else "open"
    json_cmd = [a.python, "-c", f"import json, gzip; json.load({opener}(__import__('sys').argv[1]))", str(path)]
    budget_cmd = [env_cmd[0], env_cmd[1], env_cmd[2].replace("sys.argv[2]]", "sys.argv[2], '--budget', '--model', "
                                                             "'qwen3.8-27b', '--tokens', '8192']"), *env_cmd[3:]]
    runs: dict[str, list[dict[str, float]]] = {"kernelcheck trace": [], "json.load": []}
    if a.budget:
        runs["trace --budget"] = []
    for i in range(a.repeat):
        runs["kernelcheck trace"].append(measure(env_cmd, f"run {i + 1}/{a.repeat}: kernelcheck trace"))
        runs["json.load"].append(measure(json_cmd, f"run {i + 1}/{a.repeat}: json.load"))
        if a.budget:
            runs["trace --budget"].append(measure(budget_cmd, f"run {i + 1}/{a.repeat}: trace --budget"))
    report(a, runs, mb, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
