"""doctor --upgrade against real transformers releases from the index: each forecast is compared with doctor
run in an environment really built at the target versions, the live environment is unchanged (pip freeze and
file listing before/after, with an interrupt in the middle), and the CI recipe's command runs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from kernelcheck import schemas
from tests.envs import REPO, run, run_json, site

pytestmark = pytest.mark.integration

PAIRS = {
    "5.24-to-5.25": (("transformers==5.24.0", "kernels==0.18.3"), ("transformers==5.25.0", "kernels==0.19.1")),
    "5.17-to-5.20": (("transformers==5.17.0",), ("transformers==5.20.2",)),
}


def _comparable(report: dict) -> dict:
    return {"verdict": report["verdict"], "exit_code": report["exit_code"],
            "functions": sorted((f["name"], f["status"], f.get("implementation")) for f in report["functions"]),
            "findings": sorted({f["id"] for f in report["findings"]} - {"import-proof-cached"})}


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_forecast_matches_doctor_in_an_environment_built_at_the_target(pair: str):
    now, target = PAIRS[pair]
    base = site(*now, deps=True)
    code, fc = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "train", "--upgrade", *target], base,
                        timeout=1200)
    assert fc["schema"] == "kernelcheck.forecast/1"
    jsonschema.validate(fc, schemas.load("forecast"))
    for side in ("before", "after"):
        jsonschema.validate(fc[side], schemas.load("doctor"))
    changed = {c["name"]: c["after"] for c in fc["changes"]}
    for spec in target:
        name, version = spec.split("==")
        assert changed.get(name) == version, fc["changes"]
    real_code, real = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "train"], site(*target, deps=True))
    assert _comparable(fc["after"]) == _comparable(real)
    assert code == real_code == fc["exit_code"]
    before_code, before = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "train"], base)
    assert _comparable(fc["before"]) == _comparable(before)


def _listing(*folders: Path) -> list[tuple[str, int, int]]:
    out = []
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                st = p.stat()
                out.append((str(p), st.st_size, st.st_mtime_ns))
    return out


def _freeze(base: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(base))
    return subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, text=True,
                          env=env).stdout


def test_the_live_environment_is_unchanged_also_when_interrupted(tmp_path: Path):
    base = site(*PAIRS["5.24-to-5.25"][0], deps=True)
    site_packages = Path(next(p for p in sys.path if p.endswith("site-packages")))
    before = (_freeze(base), _listing(base), sorted(p.name for p in site_packages.iterdir()))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(base), str(REPO)]), TMPDIR=str(tmp), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b", "--upgrade",
                             *PAIRS["5.24-to-5.25"][1]], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.startswith("kernelcheck-forecast-") for p in tmp.iterdir()):
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    time.sleep(1.0)  # pip is writing into the overlay now
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert not [p for p in tmp.iterdir() if p.name.startswith("kernelcheck-forecast-")]
    assert (_freeze(base), _listing(base), sorted(p.name for p in site_packages.iterdir())) == before


def test_the_ci_recipe_runs(tmp_path: Path):
    recipe = (REPO / "examples" / "github-actions-upgrade.yml").read_text()
    lines = [m.group(1) for m in re.finditer(r"^\s+run: (kernelcheck .+)$", recipe, re.M)]
    assert len(lines) == 1
    assert "--upgrade -r requirements.txt" in lines[0] and "--if-worse" in lines[0]  # wording: the example's own words
    (tmp_path / "requirements.txt").write_text("transformers==5.25.0\nkernels==0.19.1\n")
    base = site(*PAIRS["5.24-to-5.25"][0], deps=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(base), str(REPO)]), HF_HUB_OFFLINE="1",
               MODEL="qwen3.8-27b", MODE="train")
    script = f'kernelcheck() {{ "{sys.executable}" -m kernelcheck "$@"; }}\n{lines[0]}\n'
    res = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=1200)
    assert res.returncode in (0, 3, 4), res.stderr[-2000:]
    assert res.stdout.strip(), res.stderr[-2000:]  # the forecast's text (its words: tests/unit/test_forecast.py)
    xml = (tmp_path / "reports" / "kernel-forecast.xml").read_text()
    assert '<testsuite name="kernelcheck forecast"' in xml and 'name="verdict"' in xml
    # the gate fails only when the forecast is worse than now: a worse forecast is a failed verdict case
    assert (res.returncode != 0) == ("<failure" in xml.split('name="verdict"')[1].split("</testcase>")[0])


def test_a_spec_pip_cannot_resolve_is_exit_2_and_one_paragraph():
    res = run(["doctor", "--model", "qwen3.8-27b", "--upgrade", "transformers==0.0.0-no-such"])
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "--upgrade" in res.stderr  # wording: renderer test (exit 2)


def test_the_documented_arch_gate_judges_a_cuda_device_on_a_cpu_torch_build(tmp_path: Path):
    """`doctor --arch 9.0 --upgrade transformers==5.25.0 --if-worse` on this CPU torch build (5.24 with the base's
    kernels, Hub kernels off by default): 5.25 turns Hub kernels on, and for a CUDA device offline with an empty
    cache the load fails. The forecast is for the device --arch names (cuda, not the CPU build's cpu), so the gate
    does not pass because it silently judged the CPU."""
    code, fc = run_json(["doctor", "--model", "qwen3.8-27b", "--arch", "9.0", "--upgrade", "transformers==5.25.0",
                         "--if-worse"], timeout=1200, env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)})
    assert fc["device"] == {"type": "cuda", "origin": "arch", "visible": False}
    assert fc["after"]["device"]["type"] == "cuda" and fc["after"]["hub"]["device"] == "cuda"
    assert fc["diff"]["worse"] and code == fc["exit_code"] != 0, fc["diff"]
