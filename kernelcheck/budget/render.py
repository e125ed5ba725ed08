"""A budget as a picture: an SVG of two stacked bars, the measured step and the step at the floors, one colour per
class, each segment labelled where it is wide enough and titled on hover (its text: report/budget.py)."""

from __future__ import annotations

from typing import Any

from kernelcheck.padding.svg import Canvas, nice_ticks, short

COLOURS = {"gemm": "#4878a8", "attention": "#6aa3d5", "gdn": "#2e8b57", "short_conv": "#8fbc8f", "norms": "#d9534f",
           "elementwise": "#f0ad4e", "loss": "#b07aa1", "copies": "#9c755f", "optimizer": "#76b7b2",
           "communication": "#59a14f", "host_sync": "#222222", "idle": "#bbbbbb", "unclassified": "#ff00ff"}
_FALLBACK = ("#edc948", "#ff9da7", "#bab0ac", "#e15759")


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

