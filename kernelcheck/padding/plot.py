"""Where `padding --plot FILE` goes: an SVG always, a PNG only where something here really renders one.

kernelcheck adds no runtime dependency for pictures: a .png is rendered from the SVG by cairosvg (if that
Python package is importable) or by `rsvg-convert` (librsvg, if on PATH). With neither, a .png is refused
before the data is read (exit 2), never an SVG written under a .png name.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

from kernelcheck.core.errors import BadInput


def renderer() -> str | None:
    """The PNG renderer available here: "cairosvg", "rsvg-convert" or None."""
    if importlib.util.find_spec("cairosvg") is not None:
        return "cairosvg"
    return "rsvg-convert" if shutil.which("rsvg-convert") else None


def check(path: str) -> str:
    """The format --plot PATH asks for ("svg" | "png"); BadInput for another suffix or a PNG nothing renders."""
    suffix = Path(path).suffix.lower()
    if suffix == ".svg":
        return "svg"
    if suffix != ".png":
        raise BadInput(f"--plot {path}: the picture is written as .svg (or .png where cairosvg or rsvg-convert is "
                       f"installed); give a file name ending in .svg, e.g. --plot {Path(path).with_suffix('.svg')}.")
    if renderer() is None:
        raise BadInput(f"--plot {path}: nothing here renders PNG (kernelcheck draws SVG; PNG needs the cairosvg "
                       "package or the rsvg-convert program from librsvg2-bin). Nothing was read: use --plot "
                       f"{Path(path).with_suffix('.svg')}, or install one of them (`pip install cairosvg`).")
    return "png"


def write(path: str, svg: str) -> str:
    """Write the picture; returns how it was made (for the text: "SVG" or "PNG via rsvg-convert")."""
    target = Path(path)
    try:
        if check(path) == "svg":
            target.write_text(svg, encoding="utf-8")
            return "SVG"
        how = renderer()
        if how == "cairosvg":
            import cairosvg  # type: ignore[import-not-found]

            cairosvg.svg2png(bytestring=svg.encode(), write_to=str(target), output_width=1640)
        else:
            subprocess.run(["rsvg-convert", "--width", "1640", "-o", str(target)], input=svg.encode(),
                           check=True, capture_output=True, timeout=60)
        return f"PNG via {how}"
    except OSError as exc:
        raise BadInput(f"cannot write --plot {path}: {exc.strerror or exc}. Give a writable path.") from None
    except subprocess.SubprocessError as exc:
        raise BadInput(f"--plot {path}: rsvg-convert could not render the picture ({exc}); use a .svg name.") \
            from None
