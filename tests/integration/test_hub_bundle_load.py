"""The bundle `kernelcheck hub --model M --bundle FILE` recommends makes the replayed load succeed offline.

transformers 5.25.0 + kernels 0.19.1, HF_HUB_OFFLINE=1, an empty Hub cache. The load is replayed with the
installed code (benchmarks/hub_offline_load.py --replay: the model on the meta device, `model.eval()`,
`set_use_kernels(True, device_map={"": "cuda"})`, capability answered 9.0; kernels' own kernelize loads each
repository for real and validates the layer it exports against the transformers class it replaces):
1. with an empty cache it raises on every repository doctor names (gpt2: activation@v1; llama: rotary@v2 and
   liger-kernels@v4 too);
2. the bundle is built against the stand-in Hub (tests/fake_hub.py) serving stand-in builds of exactly those
   repositories (the real builds cannot be fetched here): each exports the layer classes transformers' hub mapping
   names, with the forward signatures kernels' validator compares, in a variant for this machine's torch build
   (what the replay's kernels resolves) and a CUDA one it must not pick;
3. `--verify-bundle` on the offline node says the load will succeed;
4. the replay again, offline, with the bundle's job_environment (KERNELS_CACHE=<DIR>/cache): no repository
   raises, and kernelize bound the stand-in layer to every mapped module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.envs import REPO, run_json, site
from tests.fake_hub import FakeHub, organization, publish
from tests.integration.test_hub_bundle import _digest

pytestmark = pytest.mark.integration

STACK = ("transformers==5.25.0", "kernels==0.19.1")
CUDA_VARIANT = "torch213-cxx11-cu130-x86_64-linux"

# The classes transformers 5.25's hub mapping asks each kernels-community build for (layer_name), stateless, with
# the forward signature of the transformers class (activations: forward(self, input); RMSNorm:
# forward(self, hidden_states); a kernelized function: kernels' Func module, whose forward carries the function's
# signature, here llama's apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)).
STAND_IN_LAYERS = '''import torch


class _Act(torch.nn.Module):
    def forward(self, input):
        return input


class FastGELU(_Act):
    pass


class QuickGELU(_Act):
    pass


class NewGELU(_Act):
    pass


class Silu(_Act):
    pass


class Gelu(_Act):
    pass


class GeluTanh(_Act):
    pass


class LigerRMSNorm(torch.nn.Module):
    def forward(self, hidden_states):
        return hidden_states


class apply_rotary_transformers(torch.nn.Module):
    def forward(self, q, k, cos, sin, unsqueeze_dim=1):
        return q, k
'''


@pytest.fixture(scope="module")
def stack() -> Path:
    return site(*STACK, deps=True)


def _node(tmp: Path) -> dict[str, str]:
    (tmp / "node-cache").mkdir(exist_ok=True)
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp / "node-cache"), "HF_HOME": str(tmp / "node-home"),
            "HF_ENDPOINT": "http://127.0.0.1:9"}


def _replay(model_type: str, stack: Path, env: dict[str, str]) -> dict:
    e = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(stack), str(REPO)])}
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "hub_offline_load.py"), "--model-type",
                          model_type, "--replay", "--device", "cuda", "--capability", "9.0", "--mode", "infer"],
                         capture_output=True, text=True, env=e, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _this_variant() -> str:
    """The variant kernels resolves for this machine's torch build (a CPU build: no GPU here), which is what the
    replay's load asks for."""
    import torch

    major, minor = torch.__version__.split(".")[:2]
    assert torch.version.cuda is None, "the stand-in variant below is the CPU torch build's"
    return f"torch{major}{minor}-cxx11-cpu-x86_64-linux"


@pytest.mark.parametrize("model_type,expected", [
    ("gpt2", {"kernels-community/activation@v1"}),
    ("llama", {"kernels-community/activation@v1", "kernels-community/rotary@v2",
               "kernels-community/liger-kernels@v4"}),
])
def test_the_bundle_doctor_recommends_makes_the_replayed_offline_load_succeed(model_type: str, expected: set[str],
                                                                              stack: Path, tmp_path: Path) -> None:
    # 1. offline, empty cache: the load raises on each repository doctor names
    before = _replay(model_type, stack, _node(tmp_path))
    assert before["versions"]["transformers"] == "5.25.0" and before["versions"]["kernels"] == "0.19.1"
    raised = {f"{e['repo_id']}@v{e['version']}" for e in before["resolved"] if e["error"]}
    said = {p["repo"] for p in before["predicted"]}
    assert raised == said == expected, (raised, said)
    assert "is not available in the local cache" in before["first_error"]

    # 2. the build stage: the stand-in Hub serves a stand-in build of each repository doctor's list names
    variant = _this_variant()
    srv = tmp_path / "srv"
    organization(srv, "kernels-community", trusted=True)
    for spec in said:
        repo_id, version = spec.rsplit("@v", 1)
        commit = publish(srv, repo_id, [variant, CUDA_VARIANT], versions=(int(version),))
        for v in (variant, CUDA_VARIANT):
            build = srv / repo_id / commit / "build" / v
            (build / "layers.py").write_text(STAND_IN_LAYERS)
            _digest(build)
    bundle = tmp_path / "kernels.tar.gz"
    with FakeHub(srv) as hub:
        code, data = run_json(["hub", "--model", model_type, "--mode", "infer", "--device", "cuda", "--arch", "9.0",
                               "--bundle", str(bundle)], stack,
                              env={"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0",
                                   "HF_HUB_CACHE": str(tmp_path / "build-cache"), "HF_HOME": str(tmp_path / "bh")})
    assert code == 0, data["findings"]
    got = {f"{e['repo_id']}@v{e['version']}": e for e in data["entries"]}
    assert set(got) == expected
    assert {(e["status"], e["variant"], e["digest"]["status"]) for e in got.values()} == {("bundled", variant, "ok")}

    # 3. the air-gapped node: --verify-bundle, offline, says the load will succeed
    code, ver = run_json(["hub", "--verify-bundle", str(bundle)], stack, env=_node(tmp_path))
    assert code == 0 and ver["verdict"] == "ready", ver["findings"]
    assert {c["spec"] for c in ver["checks"]} == expected
    assert all(c["present"] and c["resolved_variant"] == variant and c["digest"]["status"] == "ok"
               for c in ver["checks"]), ver["checks"]

    # 4. the job: unpacked, the environment the bundle names, offline: the load resolves every repository
    node = tmp_path / "unpacked"
    node.mkdir()
    with tarfile.open(bundle) as tar:
        tar.extractall(node, filter="data")
    job = {k: v.replace("<DIR>", str(node)) for k, v in ver["job_environment"].items() if k != "note"}
    assert job["HF_HUB_OFFLINE"] == "1" and job["KERNELS_CACHE"] == str(node / "cache")
    after = _replay(model_type, stack, {**_node(tmp_path), **job})
    assert after["first_error"] is None, after["resolved"]
    assert {f"{e['repo_id']}@v{e['version']}" for e in after["resolved"]} == expected
    assert all(e["error"] is None for e in after["resolved"])
    bound = {r["name"]: r for r in after["hub"]}
    assert set(bound) == {p["name"] for p in before["predicted"]}, after["hub"]  # every mapped name, bound
    assert all(r["status"] == "applied" for r in bound.values()), after["hub"]
    assert not os.listdir(tmp_path / "node-cache")  # the job read the bundle, not a cache of its own
