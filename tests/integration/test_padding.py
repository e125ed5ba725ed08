"""The integration half of tests/unit/test_padding.py: processes, pip or builds (the in-process tests
are there).

`kernelcheck padding` on generated data whose waste is computed independently here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_padding import (  # helpers and fixtures of the in-process half
    _run,
)


@pytest.mark.integration  # rsvg-convert is a process
def test_plot_png_is_a_real_png_where_a_renderer_is_here(tmp_path: Path) -> None:

    from kernelcheck.padding import plot

    if plot.renderer() is None:
        pytest.skip("neither cairosvg nor rsvg-convert here (the refusal is tested above)")
    f = tmp_path / "l.txt"
    f.write_text("\n".join(str(n) for n in range(1, 2000, 7)) + "\n")
    png = tmp_path / "o.png"
    code, out = _run(str(f), "--plot", str(png), "--batching", "batch:16")
    assert code == 0 and "PNG via" in out  # wording: renderer test
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
