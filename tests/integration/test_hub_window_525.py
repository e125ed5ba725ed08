"""transformers 5.25 with a `kernels` outside its window (or not importable): from_pretrained's use_kernels=True
default raises ValueError at load, so the verdict is BROKEN (exit 4), and the whole report says so - no hub line
saying transformers treats kernels as absent, no info finding saying Hub kernels are off.
The base venv's kernels 0.17.2 is the real out-of-window release; transformers 5.25.0 comes from a test site."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envs import run_json, site

pytestmark = pytest.mark.integration

DOCTOR = ["doctor", "--model", "qwen3.8-27b", "--hub-device", "cuda"]


def _consistent_broken(code: int, data: dict) -> None:
    assert code == 4 and data["verdict"] == "broken", data["findings"]
    ids = {f["id"]: f for f in data["findings"]}
    assert ids["hub-kernels-unusable"]["severity"] == "broken"
    assert "USE_HUB_KERNELS=0" in ids["hub-kernels-unusable"]["fix"]
    assert "hub-kernels-absent" not in ids and "hub-not-used" not in ids  # both said "off / not loaded": info
    hub = data["hub"]
    # set_use_kernels raises: the window line says from_pretrained refuses to load, never that transformers treats
    # kernels as absent (report/hub_text.py words `refused`, tests/unit/test_hub_text.py)
    assert hub["used"] is False and hub["transformers"]["refuses_when_unusable"] is True


def test_kernels_outside_the_5_25_window_is_broken_throughout_the_report() -> None:
    code, data = run_json(DOCTOR, site("transformers==5.25.0"))
    assert data["environment"]["kernels"] == "0.17.2"
    _consistent_broken(code, data)


def test_kernels_that_does_not_import_under_5_25_is_broken_throughout_the_report(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'kernels' or name.startswith('kernels.'):\n"
        "            raise ImportError('no kernels in this environment')\n"
        "sys.meta_path.insert(0, _Absent())\n")
    code, data = run_json(DOCTOR, tmp_path, site("transformers==5.25.0"))
    _consistent_broken(code, data)
    # kernels does not import: nothing is resolved (the line saying so is worded in tests/unit/test_hub_text.py)
    assert data["hub"]["names"] == [] and data["hub"]["repos"] == [], data["hub"]


def test_use_hub_kernels_0_under_5_25_with_kernels_outside_the_window_is_not_broken() -> None:
    code, data = run_json(DOCTOR, site("transformers==5.25.0"), env={"USE_HUB_KERNELS": "0"})
    assert code == 3, data["findings"]
    assert not [f for f in data["findings"] if f["id"] == "hub-kernels-unusable"]
