"""The suite's time and size figures in README.md, CONTRIBUTING.md and docs/faults.md are the ones
scripts/suite_figures.json records (the fast lane measured on the 2-core machine by `python
scripts/suite_figures.py --measure`, in CPU seconds; the full suite's first run from CI): no doc says its own."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("suite_figures", REPO / "scripts" / "suite_figures.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_doc_says_the_recorded_figures() -> None:
    script = _script()
    rec = script.record()
    fast = rec["fast_lane"]
    assert fast["cores"] == 2 and fast["cpu_s"] > 0 and fast["tests"] > 0 and fast["commit"]
    stale = {doc: "differs" for doc, (old, new) in script.rewrite(rec).items() if old != new}
    assert stale == {}, "run python scripts/suite_figures.py (the docs differ from scripts/suite_figures.json)"
    readme = (REPO / "README.md").read_text()
    assert f"about {fast['cpu_s']:,.0f} s of CPU time on the 2-core machine" in readme
    assert "~30 s on 2 cores" not in readme and "about 25 s of CPU" not in readme


def test_a_doc_that_drifts_from_the_record_is_caught(tmp_path: Path) -> None:
    script = _script()
    rec = json.loads(json.dumps(script.record()))
    rec["fast_lane"]["cpu_s"] = float(rec["fast_lane"]["cpu_s"]) + 100
    assert any(old != new for old, new in script.rewrite(rec).values())
