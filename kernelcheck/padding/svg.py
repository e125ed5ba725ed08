"""The padding picture: a histogram of example lengths, and the tokens each length bin costs, padding marked.

Two panels over one length axis, so it reads at a glance:
- top: examples per length bin (the histogram of lengths);
- bottom: the tokens each bin costs, real tokens in blue with the padding its examples carried stacked in red.
Both axes carry labelled ticks. Lengths go on a log axis when they are skewed (the longest example is at least
8x the median, as chat data is), else on a linear one; the bin width is said under the axis. The median, the
rule's token limit (budget:N / packing:N) and the lengths batches were padded to (a rug of ticks) are drawn.
The SVG is standalone (no script, no font files): any browser, `rsvg-convert` or cairosvg renders it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape

from kernelcheck.padding.waste import Waste

W, H = 820, 560
LEFT, RIGHT, TOP = 78, 24, 64
PANEL_H, GAP = 170, 56  # each panel's height; the space between them (the top panel's x labels)
BLUE, RED, GREY, INK = "#4878a8", "#d9534f", "#888888", "#222222"
SKEW = 8  # longest >= SKEW x median: log-scaled lengths


def short(n: float) -> str:
    """12 -> "12", 1500 -> "1.5k", 2_000_000 -> "2M" (tick labels)."""
    for div, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if abs(n) >= div:
            return f"{n / div:.1f}".rstrip("0").rstrip(".") + unit
    return f"{n:g}"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 5 x 10^k) up to at least `top`: at least three ticks for any top > 0."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / max(count - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(max(n, 2) + 1)]


@dataclass(frozen=True)
class Axis:
    """The length axis: linear bins of one width, or log bins (each about `ratio` times the one before)."""

    log: bool
    edges: tuple[int, ...]  # bin i holds lengths edges[i]+1 .. edges[i+1]
    end: int  # the axis' right end (a length)

    def x(self, length: float) -> float:
        """0..1 across the plot for a length; length n covers n-0.5 .. n+0.5, so a bin of lengths lo..hi spans
        x(lo - 0.5) .. x(hi + 0.5) and a tick t sits at x(t)."""
        if self.log:
            return math.log(max(length, 0.5) / 0.5) / math.log((self.end + 0.5) / 0.5)
        return max(length - 0.5, 0.0) / self.end if self.end else 0.0

    def ticks(self) -> list[int]:
        if not self.log:
            return [max(int(t), 1) for t in nice_ticks(self.end, 6) if t <= self.end]
        out = [m * 10 ** k for k in range(10) for m in (1, 2, 5) if m * 10 ** k <= self.end]
        return out if len(out) <= 12 else [t for t in out if str(t)[0] == "1"]

    def describe(self) -> str:
        if self.log:
            ratio = (self.end / max(self.edges[1], 1)) ** (1 / max(len(self.edges) - 2, 1))
            return f"log scale, each bin about {ratio:.2f}x as long as the one before"
        return f"bin width {self.edges[1] - self.edges[0]:,} tokens"


def counted_longest(w: Waste) -> int:
    """The longest length as counted (an example over budget:N / packing:N is counted at N): the axis' extent."""
    return max(w.by_length, default=w.longest)


def axis_for(w: Waste, nbins: int = 40) -> Axis:
    longest = counted_longest(w)
    end = max(longest, limit_of(w) or 0) if (limit_of(w) or 0) <= 2 * longest else longest
    if longest >= SKEW * w.median and longest >= 64:
        ratio = end ** (1 / nbins)
        edges = sorted({0, *(min(end, round(ratio ** i)) for i in range(nbins + 1))})
        return Axis(True, tuple(edges), end)
    raw = end / nbins
    mag = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    width = max(1, int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)))
    return Axis(False, tuple(range(0, end + width, width)), -(-end // width) * width)


def limit_of(w: Waste) -> int | None:
    """The rule's token limit on one example (budget:N, packing:N); batch:B has none."""
    return w.rule.value if w.rule.kind in ("budget", "packing") else None


@dataclass(frozen=True)
class Bin:
    lo: int
    hi: int
    examples: int
    real: int
    pad: int
    padded_to: int  # batches whose longest example falls in this bin


def bins(w: Waste, axis: Axis) -> list[Bin]:
    out = []
    for lo0, hi in zip(axis.edges, axis.edges[1:], strict=False):
        lo = lo0 + 1
        inside = [n for n in w.by_length if lo <= n <= hi]
        out.append(Bin(lo, hi, sum(w.by_length[n] for n in inside), sum(n * w.by_length[n] for n in inside),
                       sum(w.waste_by_length[n] for n in inside), sum(w.pad_to[n] for n in w.pad_to
                                                                       if lo <= n <= hi)))
    return out


class Canvas:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(self, x: float, y: float, s: str, anchor: str = "middle", size: int = 12, extra: str = "") -> None:
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"{extra}>'
                 f"{escape(s)}</text>")

    def line(self, x1: float, y1: float, x2: float, y2: float, colour: str = INK, extra: str = "") -> None:
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}"{extra}/>')

    def rect(self, cls: str, x: float, y: float, w: float, h: float, colour: str, tip: str) -> None:
        self.add(f'<rect class="{cls}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{h:.1f}" '
                 f'fill="{colour}"><title>{escape(tip)}</title></rect>')


@dataclass(frozen=True)
class Panel:
    top: float  # y of the panel's top edge
    ymax: float

    def y(self, v: float) -> float:
        return self.top + PANEL_H - v / self.ymax * PANEL_H if self.ymax else self.top + PANEL_H


def _frame(c: Canvas, p: Panel, axis: Axis, ylabel: str, label_dy: float = 16) -> None:
    pw = W - LEFT - RIGHT
    base = p.top + PANEL_H
    for t in nice_ticks(p.ymax, 5):
        c.line(LEFT, p.y(t), LEFT + pw, p.y(t), "#e4e4e4")
        c.line(LEFT - 4, p.y(t), LEFT, p.y(t))
        c.text(LEFT - 7, p.y(t) + 4, short(t), anchor="end", size=11)
    for t in axis.ticks():
        x = LEFT + axis.x(t) * pw
        c.line(x, base, x, base + 4)
        c.text(x, base + label_dy, short(t), size=11)
    c.line(LEFT, base, LEFT + pw, base)
    c.line(LEFT, p.top, LEFT, base)
    mid = p.top + PANEL_H / 2
    c.text(18, mid, ylabel, extra=f' transform="rotate(-90 18 {mid:.1f})"')


def _histogram(c: Canvas, bs: list[Bin], axis: Axis, top: float) -> None:
    pw = W - LEFT - RIGHT
    p = Panel(top, float(nice_ticks(max((b.examples for b in bs), default=1))[-1]))
    _frame(c, p, axis, "examples")
    for b in bs:
        if b.examples:
            x0, x1 = LEFT + axis.x(b.lo - 0.5) * pw, LEFT + axis.x(b.hi + 0.5) * pw
            c.rect("count", x0 + 0.5, p.y(b.examples), x1 - x0 - 1, p.y(0) - p.y(b.examples), BLUE,
                   f"lengths {b.lo:,}-{b.hi:,}: {b.examples:,} examples")


def _tokens(c: Canvas, w: Waste, bs: list[Bin], axis: Axis, top: float) -> None:
    pw = W - LEFT - RIGHT
    p = Panel(top, float(nice_ticks(max((b.real + b.pad for b in bs), default=1))[-1]))
    _frame(c, p, axis, "tokens computed", label_dy=24)
    for b in bs:
        x0, x1 = LEFT + axis.x(b.lo - 0.5) * pw, LEFT + axis.x(b.hi + 0.5) * pw
        if b.real:
            c.rect("real", x0 + 0.5, p.y(b.real), x1 - x0 - 1, p.y(0) - p.y(b.real), BLUE,
                   f"{b.lo}-{b.hi}: {b.real} real tokens")
        if b.pad:
            c.rect("pad", x0 + 0.5, p.y(b.real + b.pad), x1 - x0 - 1, p.y(b.real) - p.y(b.real + b.pad), RED,
                   f"{b.lo}-{b.hi}: {b.pad} padding tokens")
    for n in sorted(w.pad_to):  # the rug: one tick at each length a batch was padded to, where it lies
        xn = LEFT + axis.x(n) * pw
        c.line(xn, p.y(0) + 2, xn, p.y(0) + 9, INK, ' stroke-width="1.5" class="padded-to"')


def _markers(c: Canvas, w: Waste, axis: Axis) -> None:
    """The median and the rule's limit, as dashed lines across both panels, labelled at the top."""
    pw = W - LEFT - RIGHT
    y0, y1 = TOP, TOP + 2 * PANEL_H + GAP
    med = w.median
    xm = LEFT + axis.x(med) * pw
    c.line(xm, y0, xm, y1, GREY, ' stroke-dasharray="4 3" class="median"')
    c.text(xm, y0 - 6, f"median {med:,}", size=11, extra=f' fill="{GREY}"')
    limit = limit_of(w)
    if limit is None:
        return
    if limit <= axis.end:
        xl = LEFT + axis.x(limit) * pw
        c.line(xl, y0, xl, y1, RED, ' stroke-dasharray="6 3" stroke-width="1.5" class="limit"')
        # examples longer than the limit are counted at it: the line says how many sit there
        clipped = f" ({w.truncated:,} longer, counted here)" if w.truncated else ""
        c.text(xl, y0 - 6, f"{w.rule.kind} {limit:,} tokens{clipped}", anchor="end" if xl > W / 2 else "start",
               size=11, extra=f' fill="{RED}"' + (' class="clipped"' if w.truncated else ""))
    else:
        c.text(LEFT + pw, y0 - 6, f"{w.rule.kind} {limit:,} tokens: beyond the longest example ->", anchor="end",
               size=11, extra=f' fill="{RED}" class="limit"')


CHAR_W = 7.6  # the widest average advance of a 12 px sans-serif text (DejaVu Sans: 0.63 em), for layout


def text_width(s: str, size: int = 12) -> float:
    return len(s) * CHAR_W * size / 12


def _legend(c: Canvas, w: Waste, y: float) -> None:
    """The legend under the axis, inside the picture: an item that would cross the right edge starts a line."""
    items = [(BLUE, "real tokens"), (RED, f"padding: {w.pad_tokens:,} tokens, {w.padding_fraction:.1%} of computed")]
    x: float = LEFT
    for colour, label in items:
        c.add(f'<rect x="{x:.1f}" y="{y - 10}" width="12" height="12" fill="{colour}"/>')
        c.text(x + 17, y, label, anchor="start")
        x += 17 + text_width(label) + 24
    if w.rule.kind != "packing":
        rug = f"a length batches were padded to ({w.steps:,} batches)"
        if x + 6 + text_width(rug) > W - RIGHT:  # does not fit after the others: its own line below them
            x, y = LEFT, y + 18
        c.line(x, y - 10, x, y + 2, INK, ' stroke-width="2"')
        c.text(x + 6, y, rug, anchor="start")


def render(w: Waste, title: str, nbins: int = 40) -> str:
    axis = axis_for(w, nbins)
    bs = bins(w, axis)
    c = Canvas()
    c.add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
          f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12" fill="{INK}">')
    c.add(f'<rect width="{W}" height="{H}" fill="white"/>')
    c.text(W / 2, 22, title, size=15)
    c.text(W / 2, 42, f"{w.examples:,} examples, longest {w.longest:,} tokens · {w.rule}: {w.steps:,} steps · "
                      f"packing at most {w.packing_speedup_bound:.2f}x faster", size=12, extra=f' fill="{GREY}"')
    top2 = TOP + PANEL_H + GAP
    _histogram(c, bs, axis, TOP)
    _tokens(c, w, bs, axis, top2)
    _markers(c, w, axis)
    base = top2 + PANEL_H
    c.text(LEFT + (W - LEFT - RIGHT) / 2, base + 42, f"example length (tokens) · {axis.describe()}")
    _legend(c, w, base + 68)
    c.add("</svg>")
    return "\n".join(c.parts) + "\n"
