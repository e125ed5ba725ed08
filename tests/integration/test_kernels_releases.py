"""The kernels adapter against every real kernels release generation installed from the index (pip --target
sites under the test cache): 0.15.2, 0.17.2, 0.18.3, 0.19.1. Each answer the adapter gives is checked against
what that same release really does with the same files (its resolver's reasons, the variant `get_local_kernel`
loads, the lock `load_kernel(..., lockfile=)` reads, its offline version error). Build variants are pure-Python
folders in kernels' real cache layout (tests/kernel_repos.py). A release kernelcheck does not know is a stand-in
distribution (the one thing that cannot be installed: a future kernels), and must become a finding, never exit 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import REPO, run_json, site
from tests.kernel_repos import cache_repo

pytestmark = pytest.mark.integration

RELEASES = {
    "0.15.2": ("kernels==0.15.2", "kernels-data==0.15.2", "tomlkit"),
    "0.17.2": ("kernels==0.17.2",),
    "0.18.3": ("kernels==0.18.3", "tomlkit"),
    "0.19.1": ("kernels==0.19.1", "tomlkit"),
}
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
CU130 = "torch211-cxx11-cu130-x86_64-linux"


def _probe(kernels_site: Path, work: Path) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(kernels_site), str(REPO)])
    res = subprocess.run([sys.executable, str(PROGRAMS / "kernels_api_probe.py"), str(work)], capture_output=True,
                         text=True, env=e, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_the_adapter_answers_as_the_real_release_does(release: str, tmp_path: Path) -> None:
    got = _probe(site(*RELEASES[release]), tmp_path)
    assert got["kernels"] == release and got["generation"] == release.rsplit(".", 1)[0]
    assert got["newer"] is None
    chosen = got["here"][0]
    assert chosen[1] is True  # the real get_local_kernel loads the variant the adapter ranks first
    assert f"/build/{chosen[0]}/" in got["real_local_file"]
    reasons = {v: r for v, ok, r in got["here"] if not ok}
    assert reasons["torch29-cxx11-cu126-x86_64-linux"] == \
        "Torch version (2.9) does not match environment Torch version (2.13)"
    assert got["here_kinds"]["torch-universal"] == ["noarch", None, "universal"]
    assert got["target"][0] == [CU130, True, None]  # --torch 2.11 --cuda 13.0 through the release's own resolver
    assert got["meta"][1:] == ["cuda", ["8.0", "9.0"]]
    assert got["supports"] == (None if release == "0.15.2" else [True, False])  # 0.15 has no arch check
    assert got["cached_versions"] == {"1": got["commit"], "3": got["commit"]}
    assert got["offline_error"].startswith(
        "Version 3 of 'kernels-community/absent' is not available in the local cache")
    assert got["offline_ok"] is None
    assert f"/snapshots/{got['commit']}/build/torch213-cxx11-cpu-x86_64-linux/" in got["lock_loaded_file"]
    assert got["train_modes"][0] == "Mode.TRAINING"


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_hub_resolves_the_target_build_with_every_release(release: str, tmp_path: Path) -> None:
    """`hub --torch 2.11 --cuda 13.0 --arch 9.0` (a CPU build box preparing an H200 image), offline, with each
    release: the build kernels would choose there is named, never an internal error."""
    cache = tmp_path / "hf"
    for repo in ("kernels-community/fla", "kernels-community/mamba-ssm"):
        cache_repo(cache, repo, [CU130, "torch213-cxx11-cpu-x86_64-linux", "torch29-cxx11-cu126-x86_64-linux"])
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v3", "--torch", "2.11", "--cuda", "13.0",
                           "--arch", "9.0"], site(*RELEASES[release]), env=env)
    assert code == 0, data["findings"]
    (repo,) = data["hub"]["repos"]
    assert repo["chosen"] == CU130 and repo["source"] == "hf-cache" and repo["unusable"] is None
    assert data["environment"]["kernels"] == release


def _future_kernels(root: Path, version: str) -> Path:
    """A stand-in `kernels` distribution of a release that does not exist yet, with none of the names any known
    generation has (what a layout kernelcheck does not know looks like)."""
    pkg = root / "kernels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f'__version__ = "{version}"\n')
    info = root / f"kernels-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: kernels\nVersion: {version}\n")
    (info / "RECORD").write_text("")
    return root


def test_a_kernels_newer_than_kernelcheck_knows_is_said_not_a_crash(tmp_path: Path) -> None:
    fake = _future_kernels(tmp_path / "k", "0.99.0")
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v3"], fake,
                          env={"HF_HUB_CACHE": str(tmp_path / "hf")})
    assert code in (0, 3), data
    (repo,) = data["hub"]["repos"]
    assert "kernels 0.99.0 is newer than kernelcheck knows: Hub variants not listed" in repo["unusable"]


def test_an_unknown_layout_inside_transformers_window_is_a_finding_on_the_default_hub_path(tmp_path: Path) -> None:
    """transformers 5.25 (Hub kernels on by default) with a kernels 0.19.9 stand-in whose layout is not 0.19's."""
    fake = _future_kernels(tmp_path / "k", "0.19.9")
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub-device", "cuda"], fake,
                          site("transformers==5.25.0"), env={"HF_HUB_CACHE": str(tmp_path / "hf")})
    assert code == 3, data["findings"]
    (f,) = [x for x in data["findings"] if x["id"] == "hub-kernels-layout-unknown"]
    assert f["severity"] == "fallback" and "USE_HUB_KERNELS=0" in f["fix"]
    assert data["hub"]["used"] is True and data["hub"]["repos"] == []
