"""The report's `budget` section (trace --budget, verify --step --budget): one step budget per path (budget/build.py
makes each; "trace" for a trace file, "fast" and "reference" for verify --step), under its own schema id, and its
text (fits 100 columns; the picture is budget/render.py's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelcheck import schemas

SCHEMA = schemas.schema_id("budget")


@dataclass(frozen=True)
class BudgetSection:
    paths: dict[str, dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "paths": {k: {kk: vv for kk, vv in v.items() if kk != "schema"}
                                            for k, v in self.paths.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BudgetSection:
        return cls(dict(data["paths"]))


WIDTH = 100


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _wrap(prefix: str, text: str, indent: str = "      ", width: int = WIDTH - 2) -> list[str]:
    """Words after `prefix`, wrapped at `width` (the step's lines are indented 2 more), continuation `indent`."""
    out, line = [], prefix
    for word in text.split():
        if len(line) + 1 + len(word) > width and line.strip():
            out.append(line)
            line = indent + word
        else:
            line = f"{line} {word}" if line.strip() else line + word
    out.append(line)
    return out


def text(b: dict[str, Any]) -> list[str]:
    """The budget's lines: a header, one table per step, the MFU, the causes with their fixes."""
    lines = []
    peak = b.get("peak")
    head = f"step budget of {b['source']}" + (f" on {b['device']}" if b.get("device") else "")
    lines += _wrap("", head, "  ", WIDTH)
    if peak:
        lines += _wrap("  peaks:", f"{peak['bf16_tflops']:,} TFLOP/s dense bf16, {peak['hbm_tb_s']} TB/s "
                       f"({peak['gpu']}: {peak['reference']})", "    ")
    mdl = b.get("model")
    if mdl:
        layers = " + ".join(f"{n} {t}" for t, n in mdl["layers"].items())
        lines += _wrap("  model:", f"{mdl['query']}, {layers}, {mdl['tokens']:,} tokens, {mdl['mode']}"
                       + (", checkpointing" if mdl["checkpointing"] else ""), "    ")
    for note in b.get("notes", []):
        lines += _wrap("  note:", note, "    ")
    for st in b["steps"]:  # indented under the head, so a reader (or a doc sample) takes the budget as one block
        lines += [f"  {line}" for line in _step(st)]
    if b.get("steps_without_gpu_activity"):
        lines += _wrap("  steps without GPU activity:", ", ".join(b["steps_without_gpu_activity"]), "    ")
    return lines


def _step(st: dict[str, Any]) -> list[str]:
    out = [f"{st['name']}: {st['gpu_time_ms']:,.1f} ms of GPU time, {st['activities']:,} GPU activities",
           f"  {'class':<30} {'measured ms':>12} {'share':>7} {'floor ms':>10} {'bound':>8} {'gap ms':>10}"]
    for r in st["classes"]:
        if not r["measured_ms"] and not r["floor_ms"]:
            continue
        out.append(f"  {_cut(r['title'], 30):<30} {r['measured_ms']:>12,.1f} {r['share'] * 100:>6.1f}% "
                   f"{_ms(r['floor_ms']):>10} {r['floor_by'] or '-':>8} {_ms(r['gap_ms']):>10}")
    unc = st["unclassified"]
    if unc["ms"]:
        out.append(f"  {'unclassified':<30} {unc['ms']:>12,.1f} {unc['share'] * 100:>6.1f}% {'-':>10} {'-':>8} "
                   f"{'-':>10}")
    if st["overlap_ms"] >= 0.05:
        out.append(f"  {'overlap (ran at once)':<30} {-st['overlap_ms']:>12,.1f}")
    out.append(f"  {'sum':<30} {st['sum_ms']:>12,.1f}  (the step's GPU time: {st['gpu_time_ms']:,.1f} ms)")
    out += _wrap("  classified:", f"{st['coverage'] * 100:.1f}% of the step's GPU time"
                 + (f"; unclassified {unc['ms']:,.1f} ms in {unc['distinct']} kernel name(s): "
                    + ", ".join(f"{_cut(k['name'], 60)} ({k['ms']:,.1f} ms)" for k in unc["kernels"][:5])
                    if unc["ms"] else ""), "    ")
    mfu = st.get("mfu")
    if mfu:
        proj = (f"; projected full model ({' + '.join(f'{n} {t}' for t, n in mfu['full_layers'].items())}) "
                f"{mfu['projected_full'] * 100:.1f}% at {mfu['projected_step_ms']:,.1f} ms/step"
                if mfu.get("projected_full") is not None else "")
        out += _wrap("  MFU (6*N*T):", f"measured {mfu['measured'] * 100:.1f}%{proj}", "    ")
    if st.get("step_ms_at_floors") is not None:
        out += _wrap("  at the floors:", f"{st['step_ms_at_floors']:,.1f} ms per step "
                     f"({st['gpu_time_ms'] / max(st['step_ms_at_floors'], 1e-9):.1f}x faster than measured)", "    ")
    causes = [(r, c) for r in st["classes"] for c in r["causes"]]
    if causes:
        out.append("  causes and fixes:")
        for r, c in sorted(causes, key=lambda rc: -rc[1]["ms"]):
            out += _wrap(f"  - {r['title']}, {c['ms']:,.1f} ms:", c["cause"], "      ")
            out += _wrap("      fix:", c["fix"], "        ")
            out += _wrap("      see:", c["reference"], "        ")
    return out
