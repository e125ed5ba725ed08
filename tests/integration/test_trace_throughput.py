"""`kernelcheck trace` reads a trace of 250 MB or more, made the way torch.profiler writes it, at least at 1.6x the
speed of `python -c 'import json; json.load(open(F))'` in CPU time, in under 150 MiB: benchmarks/trace_throughput.py
(the same commands side by side, alternating, each a fresh process; the CLI's start-up counts in), read from its
last line, the figure the README quotes (the median of three pairs). The benchmark runs in a process of its own:
a child's peak RSS, as Linux counts it, starts from its parent's, and this test's process may have grown."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# x json.load's MB per CPU second. The ratio moves with the CPU (sre's loops and json's C scanner do not scale alike):
# 2.36-2.46x on one 2-core machine, 1.79-1.93x from run to run on an AMD EPYC one for the same code (docs/trace.md,
# section 5). The bound sits under both with the EPYC's own spread as margin; a regression of a fifth shows on either.
TARGET = 1.6
MAX_RSS_MIB = 150
_FIGURE = re.compile(r"trace (\d+) MB: .* = ([\d.]+)x json\.load .*; RSS (\d+) vs \d+ MiB")


def test_a_large_gpu_trace_reads_at_twice_json_load_in_bounded_memory(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "trace_throughput.py"), "--size-mb", "250",
                          "--keep", str(tmp_path), "--repeat", "3"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    m = _FIGURE.search(res.stdout.strip().splitlines()[-1])
    assert m, res.stdout
    mb, ratio, rss = int(m[1]), float(m[2]), int(m[3])
    assert mb >= 250 and ratio >= TARGET and rss < MAX_RSS_MIB, res.stdout
