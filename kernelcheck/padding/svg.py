"""A histogram of example lengths with the padding each length bin carried, as a standalone SVG."""

from __future__ import annotations

from xml.sax.saxutils import escape

from kernelcheck.padding.waste import Waste

W, H, PAD_L, PAD_B, PAD_T = 720, 360, 70, 50, 40


def _short(n: int) -> str:
    for div, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def _bins(w: Waste, nbins: int) -> list[tuple[int, int, int, int]]:
    width = max(1, -(-w.longest // nbins))
    out = []
    for i in range(-(-w.longest // width)):
        lo, hi = i * width + 1, (i + 1) * width
        real = sum(n * c for n, c in w.by_length.items() if lo <= n <= hi)
        pad = sum(p for n, p in w.waste_by_length.items() if lo <= n <= hi)
        out.append((lo, hi, real, pad))
    return out


def render(w: Waste, title: str, nbins: int = 40) -> str:
    bins = _bins(w, nbins)
    top = max((r + p for _, _, r, p in bins), default=1) or 1
    pw, ph = W - PAD_L - 20, H - PAD_T - PAD_B
    bw = pw / max(len(bins), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
             f'<text x="{W / 2}" y="{H - 10}" text-anchor="middle">example length (tokens)</text>',
             f'<text x="15" y="{PAD_T + ph / 2}" transform="rotate(-90 15 {PAD_T + ph / 2})" '
             'text-anchor="middle">tokens</text>']
    for i, (lo, hi, real, pad) in enumerate(bins):
        x = PAD_L + i * bw
        hr, hp = real / top * ph, pad / top * ph
        y = PAD_T + ph - hr
        parts.append(f'<rect class="real" x="{x:.1f}" y="{y:.1f}" width="{bw * 0.9:.1f}" height="{hr:.1f}" '
                     f'fill="#4878a8"><title>{lo}-{hi}: {real} real tokens</title></rect>')
        if pad:
            parts.append(f'<rect class="pad" x="{x:.1f}" y="{y - hp:.1f}" width="{bw * 0.9:.1f}" '
                         f'height="{hp:.1f}" fill="#d9534f"><title>{lo}-{hi}: {pad} padding tokens</title></rect>')
    parts += [f'<line x1="{PAD_L}" y1="{PAD_T + ph}" x2="{PAD_L + pw}" y2="{PAD_T + ph}" stroke="black"/>',
              f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{PAD_T + ph}" stroke="black"/>',
              f'<text x="{PAD_L - 5}" y="{PAD_T + 4}" text-anchor="end">{_short(top)}</text>',
              f'<text x="{PAD_L - 5}" y="{PAD_T + ph}" text-anchor="end">0</text>',
              f'<text x="{PAD_L}" y="{PAD_T + ph + 16}">1</text>',
              f'<text x="{PAD_L + pw}" y="{PAD_T + ph + 16}" text-anchor="end">{w.longest:,}</text>',
              f'<rect x="{W - 250}" y="{PAD_T}" width="12" height="12" fill="#4878a8"/>',
              f'<text x="{W - 232}" y="{PAD_T + 10}">real tokens</text>',
              f'<rect x="{W - 250}" y="{PAD_T + 18}" width="12" height="12" fill="#d9534f"/>',
              f'<text x="{W - 232}" y="{PAD_T + 28}">padding ({w.padding_fraction:.1%}, {w.rule})</text>',
              "</svg>"]
    return "\n".join(parts) + "\n"
