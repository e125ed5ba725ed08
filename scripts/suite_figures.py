"""The test suite's time and size figures in README.md, CONTRIBUTING.md and docs/faults.md, from one record.

    python scripts/suite_figures.py --measure   # run the fast lane once, record its cost in suite_figures.json
    python scripts/suite_figures.py             # rewrite the figures in the docs from the record
    python scripts/suite_figures.py --check     # exit 1 naming each doc whose figures differ from the record

The fast lane is one pytest process: its cost is the CPU time of that process and its children (user + sys, as
`/usr/bin/time` reports it, read here from getrusage), which a busy machine does not inflate the way it inflates
wall time. The wall time and the load average at the start are recorded beside it, for what they are worth. The
full suite's first run (both lanes, the test cache built from nothing) is the last CI run on record: its seconds
and the size of ~/.cache/kernelcheck-tests are entered in the record by hand (`full_suite`), with their source.
tests/unit/test_suite_figures.py checks that every doc says what the record says.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "scripts" / "suite_figures.json"


def measure() -> dict[str, object]:
    """Run the fast lane once (as the README says: `python -m pytest -m "not integration"`) and time it."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    # tests/unit/test_suite_figures.py checks the docs against the record this run is about to write: left out
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not integration", "-p", "no:cacheprovider",
                          "--ignore", "tests/unit/test_suite_figures.py"], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = (res.stdout.strip().splitlines() or [""])[-1]
    passed = re.search(r"(\d+) passed", last)
    if res.returncode != 0 or passed is None:
        raise SystemExit(f"the fast lane did not pass (exit {res.returncode}): {last}\n{res.stdout[-3000:]}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return {"cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "wall_s": round(wall, 1), "load_at_start": round(load, 1), "tests": int(passed[1]),
            "cores": os.cpu_count(), "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "commit": commit.stdout.strip(), "summary": last}


def record() -> dict[str, dict[str, object]]:
    return json.loads(RECORD.read_text())


def _n(x: object) -> str:
    return f"{float(str(x)):,.0f}"


def phrases(rec: dict[str, dict[str, object]]) -> dict[str, list[tuple[re.Pattern[str], str]]]:
    """Per doc: (the phrase as any earlier version of the doc wrote it, the phrase the record gives)."""
    fast, full = rec["fast_lane"], rec["full_suite"]
    cpu, cores = _n(fast["cpu_s"]), fast["cores"]
    lane_comment = f"fast lane: in-process decisions, about {cpu} s of CPU"
    lane_sentence = (f"The fast lane ({fast['tests']:,} tests) takes about {cpu} s of CPU time on the {cores}-core "
                     f"machine\n(user + sys of the one pytest process, `/usr/bin/time`; {_n(fast['wall_s'])} s of wall "
                     f"time while other jobs shared the cores,\nload {fast['load_at_start']}; "
                     f"`python scripts/suite_figures.py --measure`, {fast['date']})")
    minutes = round(float(str(full["seconds"])) / 60)
    full_sentence = (f"The first full run takes about {minutes} minutes on {cores} cores (`bash .ci/run`: "
                     f"{_n(full['seconds'])} s in\n{full['source']})\nand fills that folder with about "
                     f"{full['cache_gb']} GB")
    return {
        "README.md": [
            (re.compile(r"fast lane: in-process decisions, (~\d+ s on \d cores|about [\d,]+ s of CPU)"),
             lane_comment),
            (re.compile(r"The fast lane (\([\d,]+ tests\)\s+)?takes about [\d,]+ s of CPU time on the \d-core\s+machine"
                        r"\s+\(user \+ sys.*?\)", re.S), lane_sentence),
            (re.compile(r"The first full run takes about \d+ minutes on \d cores \(`bash \.ci/run`: [\d,]+ s in\s+"
                        r"[^)]*\)\s+and fills that folder with about [\d.]+ GB", re.S), full_sentence),
        ],
        "CONTRIBUTING.md": [
            (re.compile(r"fast lane: in-process decisions only \([^)]*\)"),
                f"fast lane: in-process decisions only (~{cpu} s CPU)"),
            (re.compile(r"integration lane: real processes, venvs, pip, builds \([^)]*\)", re.S),
             f"integration lane: real processes, venvs, pip, builds (~{minutes} min and\n"
             f"                                        # ~{full['cache_gb']} GB in ~/.cache/kernelcheck-tests on the "
             "first run)"),
        ],
        "docs/faults.md": [
            (re.compile(r"README says what the first run fills \([^)]*\)"),
             f"README says what the first run fills ({full['cache_gb']} GB, ~{minutes} min: {full['source']})"),
        ],
    }


def rewrite(rec: dict[str, dict[str, object]]) -> dict[str, tuple[str, str]]:
    """Per doc: (its text now, its text with the record's figures)."""
    out = {}
    for doc, subs in phrases(rec).items():
        old = (REPO / doc).read_text(encoding="utf-8")
        new = old
        for pattern, text in subs:
            if not pattern.search(new):
                raise SystemExit(f"{doc}: no phrase matches {pattern.pattern!r}; put the figure back in its words")
            new = pattern.sub(lambda _m, t=text: t, new, count=1)  # type: ignore[misc]
        out[doc] = (old, new)
    return out


def main(argv: list[str]) -> int:
    if "--measure" in argv:
        rec = record() if RECORD.exists() else {}
        rec["fast_lane"] = measure()
        RECORD.write_text(json.dumps(rec, indent=1) + "\n")
        print(json.dumps(rec["fast_lane"]))
    stale = [doc for doc, (old, new) in rewrite(record()).items() if old != new]
    if "--check" in argv:
        for doc in stale:
            print(f"{doc}: its suite figures differ from {RECORD.relative_to(REPO)}")
        return 1 if stale else 0
    for doc, (old, new) in rewrite(record()).items():
        if old != new:
            (REPO / doc).write_text(new, encoding="utf-8")
            print(f"updated {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
