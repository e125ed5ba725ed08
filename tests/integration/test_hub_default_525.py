"""transformers 5.25's Hub-by-default path, end to end, on the CPU: transformers 5.25.0 + kernels 0.19.1 installed
the normal way (pip resolves the pair with its dependencies into a test site; torch 2.13 CPU from the venv).

5.25's `from_pretrained` defaults to use_kernels=True; its mapping asks for `kernels-community/fla` version 3 and
`kernels-community/mamba-ssm` version 5. Offline with an empty HF cache, kernels' own version lookup raises
`ValueError: Version 3 of 'kernels-community/fla' is not available in the local cache ...` and the load fails (the
H200 truth: tests/programs/gpu_hub_default_truth.py). The Hub here is a stand-in (tests/fake_hub.py: a local HTTP
server laid out as the Hub, answering huggingface_hub and kernels unchanged), because this machine cannot reach
the real one; every build it serves is a pure-Python folder in kernels' real layout (tests/kernel_repos.py), and
what lands in the cache is read back by the real kernels 0.19.1 code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import REPO, run_json, site
from tests.fake_hub import FakeHub, publish

pytestmark = pytest.mark.integration

STACK = ("transformers==5.25.0", "kernels==0.19.1")  # the newest consistent pair on the index, installed with deps
HUB = ["hub", "--model", "qwen3.8-27b", "--torch", "2.11", "--cuda", "13.0", "--arch", "9.0"]
DOCTOR = ["doctor", "--model", "qwen3.8-27b", "--hub-device", "cuda"]
CU130 = "torch211-cxx11-cu130-x86_64-linux"
CPU213 = "torch213-cxx11-cpu-x86_64-linux"
VARIANTS = [CU130, CPU213, "torch29-cxx11-cu126-x86_64-linux"]
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


@pytest.fixture(scope="module")
def stack() -> Path:
    return site(*STACK, deps=True)


def _offline(tmp: Path) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp / "cache"), "HF_HOME": str(tmp / "home")}


def _program(name: str, *args: str, stack: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    e = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(stack), str(REPO)])}
    return subprocess.run([sys.executable, str(PROGRAMS / f"{name}.py"), *args], capture_output=True, text=True,
                          env=e, timeout=600)


def _findings(report: dict, fid: str) -> list[dict]:
    return [f for f in report["findings"] if f["id"] == fid]


def _row(report: dict, name: str, phase: str | None = None) -> dict:
    """The hub row of `name`; `phase` "train": the row model.train() resolves (where it differs from the load's)."""
    rows = [r for r in report["hub"]["names"] if r["name"] == name]
    if phase is not None:
        rows = [r for r in rows if r.get("phase") == phase] or rows
    return rows[0]


@pytest.mark.parametrize("command", [HUB, DOCTOR], ids=["hub-target", "doctor"])
def test_offline_with_an_empty_cache_is_broken_and_names_the_prefetch_and_use_hub_kernels_0(
        command: list[str], stack: Path, tmp_path: Path) -> None:
    code, data = run_json(command, stack, env=_offline(tmp_path))
    assert data["environment"]["transformers"] == "5.25.0" and data["environment"]["kernels"] == "0.19.1"
    assert code == 4 and data["verdict"] == "broken", data["findings"]
    assert data["hub"]["used"] is True  # from_pretrained's default, read from the installed source
    missing = _findings(data, "hub-not-listable")
    assert {f["severity"] for f in missing} == {"broken"}
    fla = next(f for f in missing if "kernels-community/fla@v3" in f["message"])
    assert "chunk_gated_delta_rule" in fla["functions"]
    assert "kernelcheck hub --model qwen3.8-27b --prefetch --lock" in fla["fix"] and "USE_HUB_KERNELS=0" in fla["fix"]
    repo = next(r for r in data["hub"]["repos"] if r["repo_id"] == "kernels-community/fla")
    assert repo["version"] == 3 and repo["chosen"] is None
    # kernels' own offline version lookup, word for word what the real kernels 0.19.1 raises for the job's load
    real = _program("hub_get_kernel", "kernels-community/fla", "3", stack=stack, env=_offline(tmp_path))
    assert "FAILED ValueError" in real.stdout, (real.stdout, real.stderr[-2000:])  # wording: kernels' own message
    said = real.stdout.split("FAILED ValueError ", 1)[1].strip()
    assert said.startswith("Version 3 of 'kernels-community/fla' is not available in the local cache")
    assert repo["kernels_error"] == f"kernels' own lookup raises ValueError: {said}"
    assert _row(data, "chunk_gated_delta_rule")["path"] == "load-fails"


@pytest.mark.parametrize("command", [HUB, DOCTOR], ids=["hub-target", "doctor"])
def test_use_hub_kernels_0_keeps_the_pip_packages_and_drops_the_hub_finding(
        command: list[str], stack: Path, tmp_path: Path) -> None:
    code, data = run_json(command, stack, env={**_offline(tmp_path), "USE_HUB_KERNELS": "0"})
    assert code != 4, data["findings"]
    assert data["hub"]["used"] is False and not _findings(data, "hub-not-listable")
    assert _findings(data, "hub-not-used")


def test_prefetch_from_the_hub_stand_in_then_offline_doctor_names_each_build_and_path(
        stack: Path, tmp_path: Path) -> None:
    """Online (the stand-in Hub): `hub --prefetch --lock` downloads the build kernels chooses here for each repository
    and version the 5.25 mapping names; offline afterwards, doctor says which Hub build each layer and function gets
    and which path runs, and the real kernels 0.19.1 loads exactly that build by version and by the lock."""
    srv = tmp_path / "srv"
    fla = publish(srv, "kernels-community/fla", VARIANTS, versions=(1, 2, 3))
    publish(srv, "kernels-community/mamba-ssm", VARIANTS, versions=(4, 5))
    publish(srv, "kernels-community/activation", VARIANTS, versions=(1,))  # SiLU through ACT2FN: the whole load
    online = {"HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "home")}
    with FakeHub(srv) as hub:
        code, data = run_json(["hub", "--model", "qwen3.8-27b", "--device", "cuda", "--prefetch", "--lock",
                               str(tmp_path)], stack, env={**online, "HF_ENDPOINT": hub.url})
    assert code in (0, 3), data["findings"]
    steps = {s["package"]: s for s in data["plan"]}
    assert steps["kernels-community/fla"]["action"] == "download"
    assert steps["kernels-community/fla"]["spec"] == f"kernels-community/fla@v3/{CPU213}"
    assert steps["kernels-community/mamba-ssm"]["spec"] == f"kernels-community/mamba-ssm@v5/{CPU213}"
    assert steps["kernels.lock"]["action"] == "lock"

    code, data = run_json(DOCTOR, stack, env=_offline(tmp_path))
    assert not _findings(data, "hub-not-listable") and code != 4, data["findings"]
    chunk = _row(data, "chunk_gated_delta_rule")
    assert (chunk["repo"], chunk["variant"], chunk["path"]) == ("kernels-community/fla@v3", CPU213, "hub")
    assert (_row(data, "RMSNormGated")["variant"], _row(data, "RMSNormGated")["path"]) == (CPU213, "hub")
    assert _row(data, "causal_conv1d_fn")["path"] == "hub"
    # 5.25 maps it for inference only: the load (INFERENCE) binds the Hub build, model.train() restores torch
    assert _row(data, "fused_recurrent_gated_delta_rule")["repo"] == "kernels-community/fla@v3"
    decode = _row(data, "fused_recurrent_gated_delta_rule", "train")
    assert decode.get("phase") == "train" and decode["path"] == "torch" and "repo" not in decode, decode
    f = next(x for x in data["functions"] if x["name"] == "chunk_gated_delta_rule")
    assert f["status"] == "fast" and "Hub kernel kernels-community/fla@v3" in f["implementation"]

    by_version = _program("hub_get_kernel", "kernels-community/fla", "3", stack=stack, env=_offline(tmp_path))
    loaded = Path(by_version.stdout.strip().splitlines()[-1])  # the module kernels loaded (FAILED ... otherwise)
    assert loaded.parts[-5:] == ("snapshots", fla, "build", CPU213, "__init__.py"), by_version.stdout
    by_lock = _program("hub_load_lock", str(tmp_path / "kernels.lock"), "kernels-community/fla", stack=stack,
                       env=_offline(tmp_path))
    assert by_lock.returncode == 0, by_lock.stderr[-3000:]
    got = json.loads(by_lock.stdout.strip().splitlines()[-1])
    assert got["locked"] == ["kernels-community/activation", "kernels-community/fla", "kernels-community/mamba-ssm"]
    assert f"/build/{CPU213}/" in got["file"]


def test_a_build_stage_prefetch_for_the_h200_image_makes_the_offline_target_check_ready(
        stack: Path, tmp_path: Path) -> None:
    """`hub --torch 2.11 --cuda 13.0 --arch 9.0 --prefetch` on a CPU build box fetches the CUDA 13.0 build the H200
    image will load; offline, the same target check names it and stops being broken."""
    srv = tmp_path / "srv"
    publish(srv, "kernels-community/fla", VARIANTS, versions=(3,))
    publish(srv, "kernels-community/mamba-ssm", VARIANTS, versions=(5,))
    publish(srv, "kernels-community/activation", VARIANTS, versions=(1,))
    online = {"HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "home")}
    with FakeHub(srv) as hub:
        code, data = run_json([*HUB, "--prefetch", "--lock", str(tmp_path)], stack,
                              env={**online, "HF_ENDPOINT": hub.url})
    assert {s["spec"] for s in data["plan"] if s["action"] == "download"} == {
        f"kernels-community/activation@v1/{CU130}", f"kernels-community/fla@v3/{CU130}",
        f"kernels-community/mamba-ssm@v5/{CU130}"}
    code, data = run_json(HUB, stack, env=_offline(tmp_path))
    assert code == 0, data["findings"]
    assert {r["chosen"] for r in data["hub"]["repos"]} == {CU130}
    assert _row(data, "chunk_gated_delta_rule")["path"] == "hub"


def test_the_gpu_truth_program_agrees_with_doctor_on_the_cpu(stack: Path, tmp_path: Path) -> None:
    """tests/programs/gpu_hub_default_truth.py is what the lead runs on the H200 (docs in the program). Here, on the
    CPU, 5.25's mapping has no Hub kernel for cpu: the job loads and trains offline with an empty cache, and doctor
    on the saved folder (device cpu, from the torch build) is not broken. On the H200 the same pair is expected to
    read loaded=false with kernels' Version 3 error and doctor BROKEN (exit 4)."""
    folder = tmp_path / "tiny-qwen35"
    res = _program("gpu_hub_default_truth", str(folder), "--device", "cpu", "--dtype", "fp32", stack=stack,
                   env=_offline(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    truth = json.loads(res.stdout.strip().splitlines()[-1])
    assert truth["loaded"] is True and truth["step_ok"] is True and truth["error"] is None, truth
    assert truth["versions"]["transformers"] == "5.25.0" and truth["versions"]["kernels"] == "0.19.1"
    assert truth["implementations"]["chunk_gated_delta_rule"] == [
        "transformers.models.qwen3_5.modeling_qwen3_5.torch_chunk_gated_delta_rule"]
    code, data = run_json(["doctor", "--model", str(folder), "--mode", "train"], stack, env=_offline(tmp_path))
    assert code == 3 and not _findings(data, "hub-not-listable"), data["findings"]  # torch path: fallback, loads
