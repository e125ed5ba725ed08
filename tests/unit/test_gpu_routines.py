"""The GPU-machine routines (gpu_<what>.sh, the truth program they run, prepare_<what>.sh that fills their carry)
live in benchmarks/gpu/; benchmarks/ keeps the benchmarks. Every benchmarks/ path the repository names (docs, the
records' READMEs, README, tests, scripts, the routines themselves) is a file that exists."""

from __future__ import annotations

import re

from tests.sources import REPO, repo_files

PATH = re.compile(r"\bbenchmarks/[\w./-]+\.(?:sh|py)\b")
# a record under docs/measurements/ holds what the machine printed, as it printed it: its README is read
RAW = (".json", ".txt", ".log", ".err", ".csv", ".jsonl", ".svg", ".tgz", ".gz")


def test_the_gpu_routines_are_in_their_own_folder() -> None:
    top = {p.name for p in repo_files("benchmarks") if p.parent == REPO / "benchmarks"}
    assert "doctor_speed.py" in top
    assert sorted(n for n in top if re.match(r"(gpu|prepare)_\w+\.(sh|py)$", n)) == []
    routines = {p.name for p in repo_files("benchmarks/gpu")}
    assert {"gpu_differential.sh", "gpu_truth.py", "prepare_gpu_wheelhouse.sh"} <= routines


def test_every_benchmarks_path_the_repository_names_exists() -> None:
    named: dict[str, str] = {}
    for f in repo_files():
        rel = f.relative_to(REPO).as_posix()
        if rel.startswith("docs/measurements/") and rel.endswith(RAW):
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for m in PATH.finditer(text):
            named.setdefault(m.group(0), rel)
    assert "benchmarks/gpu/gpu_differential.sh" in named
    assert {p: where for p, where in named.items() if not (REPO / p).is_file()} == {}
