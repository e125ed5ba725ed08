"""A budget as text (fits 100 columns) and as a picture (an SVG of two stacked bars: the measured step and the
step at the floors, one colour per class, each segment labelled where it is wide enough and titled on hover)."""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from kernelcheck.padding.svg import Canvas, nice_ticks, short

COLOURS = {"gemm": "#4878a8", "attention": "#6aa3d5", "gdn": "#2e8b57", "short_conv": "#8fbc8f", "norms": "#d9534f",
           "elementwise": "#f0ad4e", "loss": "#b07aa1", "copies": "#9c755f", "optimizer": "#76b7b2",
           "communication": "#59a14f", "host_sync": "#222222", "idle": "#bbbbbb", "unclassified": "#ff00ff"}
_FALLBACK = ("#edc948", "#ff9da7", "#bab0ac", "#e15759")
WIDTH = 100


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _wrap(prefix: str, text: str, indent: str = "      ") -> list[str]:
    out, line = [], prefix
    for word in text.split():
        if len(line) + 1 + len(word) > WIDTH and line.strip():
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
    lines += _wrap("", head, "  ")
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
    for st in b["steps"]:
        lines += [""] + _step(st)
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
    if st["overlap_ms"]:
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


def svg(b: dict[str, Any], step: int = 0) -> str:
    """The picture of one step: measured vs floor, stacked by class, on one ms axis."""
    st = b["steps"][step] if b["steps"] else None
    w, h, left, right = 880, 300, 110, 24
    c = Canvas()
    title = f"{st['name'] if st else 'no GPU step'}: where the step's GPU time goes, measured vs floor"
    c.text(w / 2, 24, title, size=15)
    sub = (f"{b.get('device') or 'no GPU'}" + (f", {b['model']['query']}, {b['model']['tokens']:,} tokens"
                                                if b.get("model") else ""))
    c.text(w / 2, 42, sub, size=11)
    if st is None:
        c.text(w / 2, 120, "no GPU activity in the trace: nothing to budget", size=13)
        return _doc(c, w, h)
    segs_m = [(r["id"], r["title"], r["measured_ms"]) for r in st["classes"] if r["measured_ms"] > 0]
    if st["unclassified"]["ms"]:
        segs_m.append(("unclassified", "unclassified", st["unclassified"]["ms"]))
    segs_f = [(r["id"], r["title"], r["floor_ms"]) for r in st["classes"] if r["floor_ms"]]
    top = max(sum(v for _, _, v in segs_m), sum(v for _, _, v in segs_f), 1e-9)
    ticks = nice_ticks(top, 6)
    scale = (w - left - right) / ticks[-1]
    bars = (("measured", segs_m, 70), ("floor", segs_f, 130))
    for label, segs, y in bars:
        c.text(left - 8, y + 22, label, anchor="end", size=12)
        x = float(left)
        for i, (cid, ttl, v) in enumerate(segs):
            width = v * scale
            c.rect(cid, x, y, width, 36, COLOURS.get(cid, _FALLBACK[i % len(_FALLBACK)]),
                   f"{ttl}: {v:,.2f} ms ({label})")
            if width > 42:
                c.text(x + width / 2, y + 22, f"{v:,.0f}" if v >= 10 else f"{v:.1f}", size=10,
                       extra=' fill="#ffffff"')
            x += width
        if not segs:
            c.text(left + 6, y + 22, "not computed (no model, tokens or GPU peak)", anchor="start", size=11)
    base = 176
    c.line(left, base, w - right, base)
    for t in ticks:
        x = left + t * scale
        c.line(x, base, x, base + 4)
        c.text(x, base + 16, short(t), size=10)
    c.text((left + w - right) / 2, base + 32, "ms per step", size=11)
    _legend(c, segs_m, w, base + 50)
    return _doc(c, w, h)


def _legend(c: Canvas, segs: list[tuple[str, str, float]], w: int, y: float) -> None:
    x = 24.0
    for i, (cid, ttl, _) in enumerate(segs):
        label = ttl if len(ttl) <= 26 else ttl[:24] + ".."
        need = 18 + len(label) * 6.2 + 16
        if x + need > w - 10:
            x, y = 24.0, y + 18
        c.add(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" '
              f'fill="{COLOURS.get(cid, _FALLBACK[i % len(_FALLBACK)])}"/>')
        c.text(x + 16, y, label, anchor="start", size=11)
        x += need


def _doc(c: Canvas, w: int, h: int) -> str:
    body = "\n".join(c.parts)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="sans-serif">\n<rect width="{w}" height="{h}" fill="#ffffff"/>\n{body}\n</svg>\n')


__all__ = ["escape", "svg", "text"]
