"""The Hub prediction is the whole load: every repository transformers 5.25.0 + kernels 0.19.1 resolve when a job
loads the model on a CUDA device, offline with an empty Hub cache, equals doctor's list.

The load is replayed with the installed code (benchmarks/hub_offline_load.py --replay): the model built on the meta
device from its config, `model.eval()` and `set_use_kernels(True, device_map={"": "cuda"})` as from_pretrained
does, then `model.train()`; kernels' own kernelize picks each repository for device cuda at compute capability 9.0
(answered: no GPU here) and each `repo.load()` runs for real (it raises kernels' own "not available in the local
cache" ValueError); the replay records it and lets kernelize go on, so every repository is seen, not only the
first. The GPU rows t525_replay_* in benchmarks/gpu/gpu_differential.sh run the same program and the real loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import REPO, run_json, site

pytestmark = pytest.mark.integration

STACK = ("transformers==5.25.0", "kernels==0.19.1")
MODELS = ("llama", "qwen3_5", "gpt2", "qwen3_5_vision", "glm5_next_vision")


@pytest.fixture(scope="module")
def stack() -> Path:
    return site(*STACK, deps=True)


def _offline(tmp: Path) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp / "cache"), "HF_HOME": str(tmp / "home")}


def _replay(model_type: str, stack: Path, tmp: Path) -> dict:
    env = {**os.environ, **_offline(tmp), "PYTHONPATH": os.pathsep.join([str(stack), str(REPO)])}
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "hub_offline_load.py"), "--model-type",
                          model_type, "--replay", "--device", "cuda", "--capability", "9.0", "--mode", "train"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model_type", MODELS)
def test_every_repository_the_replayed_load_resolves_is_in_doctors_list(model_type: str, stack: Path,
                                                                        tmp_path: Path) -> None:
    got = _replay(model_type, stack, tmp_path)
    assert got["versions"]["transformers"] == "5.25.0" and got["versions"]["kernels"] == "0.19.1"
    real = {(e["phase"], f"{e['repo_id']}@v{e['version']}") for e in got["resolved"]}
    assert real, got  # every one of these models resolves at least one repository on cuda
    assert all("is not available in the local cache" in (e["error"] or "") for e in got["resolved"])
    said = {(p["phase"], p["repo"]) for p in got["predicted"]}
    assert said == real, (model_type, sorted(said ^ real))
    # doctor itself, for the same device and capability, offline: BROKEN and the same repositories
    code, data = run_json(["doctor", "--model", model_type, "--mode", "train", "--hub-device", "cuda", "--arch",
                           "9.0"], stack, env=_offline(tmp_path))
    assert code == 4 and data["verdict"] == "broken", data["findings"]
    # the section lists a repository once per name; model.train() adds a row only where it picks another one
    rows = {r["repo"] for r in data["hub"]["names"] if r.get("repo") and r["path"] == "load-fails"}
    assert rows == {r for _, r in real}
    first = got["first_error"].split("Version ", 1)[1].split(" is not", 1)[0]  # "1 of 'kernels-community/activation'"
    version, repo = first.split(" of ")
    assert f"{repo.strip(chr(39))}@v{version}" in rows


def test_gpt2_infer_offline_names_activation_and_its_prefetch(stack: Path, tmp_path: Path) -> None:
    code, data = run_json(["doctor", "--model", "gpt2", "--mode", "infer", "--hub-device", "cuda", "--arch", "9.0"],
                          stack, env=_offline(tmp_path))
    assert code == 4 and data["verdict"] == "broken"
    f = next(f for f in data["findings"] if f["id"] == "hub-not-listable")
    assert "kernels-community/activation@v1" in f["message"] and "NewGELU" in f["message"]
    assert "kernelcheck hub --model gpt2 --prefetch" in f["fix"]
    code, plan = run_json(["hub", "--model", "gpt2", "--mode", "infer", "--prefetch", "--dry-run", "--device", "cuda",
                           "--arch", "9.0"], stack, env=_offline(tmp_path))
    specs = {st["spec"] for st in plan.get("plan") or []}
    assert "kernels-community/activation@v1" in specs, plan.get("plan")
