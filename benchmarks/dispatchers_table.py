"""The summary of benchmarks/gpu/gpu_dispatchers.sh: per row and report, the exit code, the verdict, each function's
provider, the JIT / Hub fla / torch.compile findings, the compiled passes, and the truth program's load and applied
kernels (kernels' get_kernelized_layers). Usage: python benchmarks/dispatchers_table.py RESULTS_DIR > summary.md"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KEEP = ("jit-", "hub-fla-", "hub-all-latest", "hub-variant-", "compile-", "fla-640", "tilelang-", "verify-hub")


def _load(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _report(row: str, p: Path) -> list[str]:
    data = _load(p)
    rc = (p.with_suffix(".rc").read_text().strip() if p.with_suffix(".rc").exists() else "?")
    if data is None:
        err = p.with_suffix(".err")
        tail = err.read_text().strip().splitlines()[-1:] if err.exists() else []
        return [f"| {row} | {p.stem} | {rc} | no JSON | {' '.join(tail)[:160]} |"]
    provs = "; ".join(f"{f['name']}={f.get('provider')}" for f in data.get("functions", []) if f.get("used", True))
    finds = ", ".join(f"{f['id']}({f['severity']})" for f in data.get("findings", [])
                      if f["id"].startswith(KEEP))
    out = [f"| {row} | {p.stem} | {rc} | {data.get('verdict')} | {provs} | {finds} |"]
    for ps in (data.get("compiled") or {}).get("passes", []):
        parts = ", ".join(f"{x['part']}={'compiled' if x['compiled'] else 'eager'}" for x in ps["parts"])
        out.append(f"| {row} | {p.stem}:{ps['pass']} | | {ps['graphs']} graphs, {ps['graph_breaks']} breaks | "
                   f"compiled {ps['compiled_ms']} ms vs eager {ps['eager_ms']} ms, compile {ps['compile_s']} s | "
                   f"{parts}; {ps.get('error') or ''} |")
    return out


def main(root: str) -> int:
    res = Path(root)
    lines = ["| row | report | rc | verdict | providers | findings |", "|---|---|---|---|---|---|"]
    for d in sorted(x for x in res.iterdir() if x.is_dir()):
        for p in sorted(d.glob("*.json")):
            if p.name == "truth.json":
                t = _load(p) or {}
                hub = "; ".join(f"{g.get('name')}:{g.get('status')}:{','.join(g.get('repos', []))[:80]}"
                                for g in t.get("hub", []) if isinstance(g, dict) and g.get("status") != "original")
                lines.append(f"| {d.name} | truth | | loaded={t.get('loaded')} step_ok={t.get('step_ok')} | "
                             f"{hub} | {str(t.get('error'))[:160]} |")
                continue
            lines.extend(_report(d.name, p))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dispatch"))
