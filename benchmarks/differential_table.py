"""Print the H200 differential (benchmarks/gpu/gpu_differential.sh) as a markdown table: per row and mode,
doctor's exit code, verify's exit code and the truth's (0 fast, 3 a torch path ran, 4 crash), and whether
they agree. Usage: python benchmarks/differential_table.py RESULTS_DIR"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TRUTH_CODE = {"fast": 0, "fallback": 3, "fast-gdn-only": 3, "fast-conv-only": 3, "crash": 4}


def _rc(d: Path, name: str) -> str:
    f = d / f"{name}.rc"
    return f.read_text().strip() if f.exists() else "-"


def _ids(d: Path, name: str) -> str:
    try:
        rep = json.loads((d / f"{name}.json").read_text())
    except (OSError, ValueError):
        return ""
    ids = [f["id"] for f in rep.get("findings", []) if f.get("severity") != "info"]
    return ",".join(sorted(set(ids)))[:80]


def main(root: Path) -> int:
    print("| row | mode | doctor | verify | truth | agree | truth detail | doctor findings (all but info) |")
    print("|---|---|---|---|---|---|---|---|")
    bad = 0
    for d in sorted(p for p in root.iterdir() if p.is_dir() and (p / "truth.json").exists()):
        truth = json.loads((d / "truth.json").read_text())
        for mode in ("train", "infer"):
            path = truth.get("path", {}).get(mode, "crash")
            t = TRUTH_CODE.get(path, 4)
            doc, ver = _rc(d, f"doctor-{mode}"), _rc(d, f"verify-{mode}")
            agree = doc == str(t) and ver == str(t)
            bad += not agree
            phase = truth.get(mode) or {}
            detail = path
            if truth.get("load", {}).get("error"):
                detail += f" (load: {truth['load']['error'][:70]})"
            elif phase.get("error"):
                detail += f" ({phase['error'][:70]})"
            print(f"| {d.name} | {mode} | {doc} | {ver} | {t} | {'yes' if agree else 'NO'} | {detail} | "
                  f"{_ids(d, f'doctor-{mode}')} |")
    print(f"\n{bad} disagreement(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
