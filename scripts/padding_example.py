"""Regenerate docs/padding-example.svg (and .png where cairosvg or rsvg-convert renders it) from a real run of
`kernelcheck padding --plot` on a fixed, seeded set of chat-like lengths, so the picture in the docs is what the
command draws today.

    python scripts/padding_example.py

The lengths: 5,000 examples, log-normal around a median of about 30 tokens with a long tail, and a few
examples longer than budget:8192 (counted at 8,192, as the text's note says), written to a temporary
chat-lengths.txt.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SVG = REPO / "docs" / "padding-example.svg"


def lengths(n: int = 5000, seed: int = 39) -> list[int]:
    rng = random.Random(seed)
    out = [max(1, round(math.exp(rng.gauss(math.log(30), 1.3)))) for _ in range(n - 3)]
    return out + [9_000, 12_500, 20_480]  # over the budget: counted at 8,192


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "chat-lengths.txt"
        data.write_text("\n".join(map(str, lengths())) + "\n")
        out = Path(tmp) / "padding-example.svg"
        env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
        res = subprocess.run([sys.executable, "-m", "kernelcheck", "padding", data.name, "--batching", "budget:8192",
                              "--plot", str(out)], cwd=tmp, env=env, capture_output=True, text=True)
        print(res.stdout, end="")
        if res.returncode != 0:
            print(res.stderr, file=sys.stderr)
            return res.returncode
        SVG.write_text(out.read_text())
    sys.path.insert(0, str(REPO))
    from kernelcheck.padding import plot

    try:
        how = plot.write(str(SVG.with_suffix(".png")), SVG.read_text())
    except Exception as exc:  # noqa: BLE001 - no renderer here: the SVG is written, the PNG is left as it was
        print(f"PNG not written ({exc}); render docs/padding-example.svg elsewhere", file=sys.stderr)
        return 0
    print(f"wrote {SVG.relative_to(REPO)} and its PNG ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
