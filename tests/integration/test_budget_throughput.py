"""`kernelcheck trace FILE --budget` on a trace of 250 MB or more (made the way torch.profiler writes it) costs at
most 1.2x `kernelcheck trace FILE` alone in CPU time: the budget is gathered in the analysis' single pass.
benchmarks/trace_throughput.py --budget runs both side by side, alternating, each a fresh process (the median of
three pairs), and prints the ratio on its "budget" line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_RATIO = 1.2
_LINE = re.compile(r"budget (\d+) MB: trace --budget [\d.]+ vs trace [\d.]+ CPU s = ([\d.]+)x trace alone")


@pytest.mark.integration
def test_a_budget_of_a_large_trace_costs_at_most_a_fifth_more_than_reading_it(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "trace_throughput.py"), "--size-mb", "250",
                          "--keep", str(tmp_path), "--repeat", "3", "--budget"], capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    m = _LINE.search(res.stdout)
    assert m, res.stdout
    assert int(m[1]) >= 250 and float(m[2]) <= MAX_RATIO, res.stdout
