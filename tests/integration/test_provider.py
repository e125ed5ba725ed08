"""The implementation that runs, per function, in doctor's JSON and text (doctor/provider.py, core/decide.py), under
transformers 5.24 (the base venv: pip packages or torch) and 5.25's Hub default with an on-disk Hub cache
(tests/kernel_repos.py: kernels' real cache layout; the fla build carries the dispatch files the Hub records for
kernels-community/fla v3, read back by kernelcheck's fla reader). Offline; --arch 9.0 stands in for the H200."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envs import TF525, function, run, run_json, site
from tests.kernel_repos import cache_repo, write_fla_build
from tests.standin import causal_conv1d_site

pytestmark = pytest.mark.integration

CPU213 = "torch213-cxx11-cpu-x86_64-linux"
CU130 = "torch211-cxx11-cu130-x86_64-linux"
DOCTOR = ["doctor", "--model", "qwen3.8-27b", "--arch", "9.0"]


def _cache(tmp: Path) -> dict[str, str]:
    cache = tmp / "cache"
    for repo in ("kernels-community/fla", "kernels-community/mamba-ssm", "kernels-community/activation"):
        commit = cache_repo(cache, repo, [CPU213, CU130])
        if repo.endswith("/fla"):
            for v in (CPU213, CU130):
                write_fla_build(cache / "kernels--kernels-community--fla" / "snapshots" / commit / "build" / v)
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp / "home")}


def test_524_names_the_pip_package_or_torch_for_every_function(tmp_path: Path) -> None:
    conv = causal_conv1d_site(tmp_path / "conv")
    code, data = run_json([*DOCTOR, "--mode", "train"], conv)
    assert data["environment"]["transformers"].startswith("5.24"), data["environment"]
    got = {f["name"]: f["provider"] for f in data["functions"]}
    assert got == {"chunk_gated_delta_rule": "torch", "fused_recurrent_gated_delta_rule": "torch",
                   "causal_conv1d_fn": "pip:causal-conv1d 1.7.0", "causal_conv1d_update": "pip:causal-conv1d 1.7.0",
                   "attention:sdpa": "torch"}, data["functions"]


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_525_hub_default_names_the_hub_builds_and_reads_the_cached_fla_build(tmp_path: Path, mode: str) -> None:
    stack = site(*TF525, deps=True)
    env = _cache(tmp_path)
    code, data = run_json([*DOCTOR, "--mode", mode, "--hub-device", "cuda"], stack, env=env)
    assert data["environment"]["transformers"] == "5.25.0" and data["hub"]["used"] is True, data["findings"]
    # kernels picks the variant from the torch build (this CPU one), not from --arch
    fla = f"hub:kernels-community/fla@v3 (variant {CPU213})"
    conv = f"hub:kernels-community/mamba-ssm@v5 (variant {CPU213})"
    got = {f["name"]: f["provider"] for f in data["functions"]}
    want = {"chunk_gated_delta_rule": fla, "causal_conv1d_fn": conv, "causal_conv1d_update": conv,
            "attention:sdpa": "torch",
            # 5.25 maps the recurrent GDN to the Hub for inference only: train runs its torch function
            "fused_recurrent_gated_delta_rule": fla if mode == "infer" else "torch"}
    assert {k: v.split(" / ")[0] for k, v in got.items()} == want, data["functions"]
    assert data["backends"]["read_from"] == "hub-cache"  # the cached build's own files, not pip's fla
    assert not [f for f in data["findings"] if f["id"] == "hub-fla-layout-assumed"]
    text = run([*DOCTOR, "--mode", mode, "--hub-device", "cuda"], stack, env=env).stdout
    assert f"runs: {got['chunk_gated_delta_rule']}" in text  # wording: renderer test (the provider's runs: line)


def test_525_hub_default_without_the_build_on_disk_says_the_layout_is_assumed(tmp_path: Path) -> None:
    stack = site(*TF525, deps=True)
    cache = tmp_path / "cache"
    for repo in ("kernels-community/fla", "kernels-community/mamba-ssm", "kernels-community/activation"):
        cache_repo(cache, repo, [CPU213])  # pure-Python builds without fla's dispatch files
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")}
    code, data = run_json([*DOCTOR, "--mode", "train", "--hub-device", "cuda"], stack, env=env)
    assert function(data, "chunk_gated_delta_rule")["provider"].startswith("hub:kernels-community/fla@v3")
    assumed = [f for f in data["findings"] if f["id"] == "hub-fla-layout-assumed"]
    assert assumed and assumed[0]["severity"] == "warning" and data["backends"]["read_from"] == "hub-table"


def test_live_evidence_comes_from_kernels_own_record_where_kernels_has_it(tmp_path: Path) -> None:
    """kernels 0.19.1's public get_kernelized_layers (found through the kernels adapter by feature detection) says
    which kernel replaced which layer and function; kernelcheck's applied_kernels reports it with the repositories.
    The base venv's kernels 0.17.2 has no such function: the forward-identity check answers there."""
    import json
    import os
    import subprocess
    import sys

    from tests.envs import REPO

    cache_repo(tmp_path / "hf", "kc-test/tiny-norm", ["torch-universal"], name="tiny-norm")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    rows = {}
    for label, sites in (("0.19.1", [str(site(*TF525, deps=True))]), ("base", [])):
        e = {**env, "PYTHONPATH": os.pathsep.join([*sites, str(REPO)])}
        res = subprocess.run([sys.executable, str(REPO / "tests" / "programs" / "hub_applied.py")],
                             capture_output=True, text=True, env=e, timeout=600)
        lines = [x for x in res.stdout.splitlines() if x.startswith("{")]
        assert res.returncode == 0 and lines, res.stderr[-3000:]
        rows[label] = json.loads(lines[-1])["rows"]
    new = rows["0.19.1"]
    assert new["RMSNormGated"]["status"] == "applied"
    assert new["RMSNormGated"]["evidence"] == "kernels.get_kernelized_layers"
    assert any("kc-test/tiny-norm" in r for r in new["RMSNormGated"]["repos"])
    assert new["chunk_gated_delta_rule"]["status"] == "applied" and new["chunk_gated_delta_rule"]["repos"]
    assert new["RMSNormZeroCentered"]["status"] == "original" and new["RMSNormZeroCentered"]["repos"] == []
    old = rows["base"]
    if old:  # transformers 5.24 with kernels 0.17.2 (outside its window) may name no Hub kernel at all
        assert all(r["evidence"] == "forward identity" and "repos" not in r for r in old.values())


def test_a_kernels_client_that_cannot_read_0_19_variant_names_is_a_finding(tmp_path: Path) -> None:
    """The real kernels 0.18.3 (inside transformers 5.24's window; the base venv's other packages) lists a kernels
    0.19 variant name (torch-2.12-cxx11-cuda-13.0-cpython-3.12-abi3-...) misread; doctor says so, per repository."""
    k183 = site("kernels==0.18.3")
    new = "torch-2.12-cxx11-cuda-13.0-cpython-3.12-abi3-x86_64-linux"
    for repo in ("kernels-community/fla", "kernels-community/mamba-ssm", "kernels-community/activation"):
        cache_repo(tmp_path / "hf", repo, [CPU213, new])
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HOME": str(tmp_path / "home")}
    _, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], k183, env=env)
    assert data["environment"]["kernels"] == "0.18.3" and data["hub"]["used"] is True
    got = [f for f in data["findings"] if f["id"] == "hub-variant-names-unreadable"]
    assert len(got) == 3 and {f["severity"] for f in got} == {"warning"}  # fla, mamba-ssm, activation
    _, latest = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], k183,
                         env={**env, "UNSTABLE_KERNELS_ALL_LATEST": "1"})
    assert [f["severity"] for f in latest["findings"] if f["id"] == "hub-all-latest"] == ["warning"]
