"""Kernel Hub: the real `kernels` package, kernel repos written on disk in the HF cache layout, offline.

Two transformers: the installed 5.24 (kernels 0.17.2 is outside its window [0.18.2, 0.19): transformers
treats kernels as absent) and 5.22.2 from a test site (window [0.17.2, 0.18): Hub kernels really load),
so both branches of the doctor's decision run against real code. No network: HF_HUB_OFFLINE=1 everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.envs import REPO, function, run, run_json, site
from tests.kernel_repos import cache_repo, local_repo

OTHER_TORCH = ["torch29-cxx11-cu126-x86_64-linux", "torch210-cxx11-cu128-x86_64-linux"]
MATCHING = ["torch29-cxx11-cu126-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch-universal"]
# fla and mamba-ssm for the GDN and conv functions; activation for the SiLU the whole load reaches through ACT2FN
HUB_REPOS = ("kernels-community/fla", "kernels-community/mamba-ssm", "kernels-community/activation")
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"  # the scripts the tests run in other environments


@pytest.fixture(scope="module")
def t522() -> Path:
    """transformers 5.22.2: accepts kernels 0.17.2, so its layers/functions carry Hub kernel names."""
    return site("transformers==5.22.2")


def _cache(tmp: Path, variants: list[str]) -> dict[str, str]:
    cache = tmp / "hf"
    for repo in HUB_REPOS:
        cache_repo(cache, repo, variants)
    return {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp / "home"), "HF_HUB_OFFLINE": "1"}


def _run_program(name: str, *args: str, sites: tuple[Path, ...] = (), env: dict[str, str]
                 ) -> subprocess.CompletedProcess:
    """Run `python tests/programs/NAME.py ARGS` with `sites` then this repo on PYTHONPATH (another
    transformers/kernels than the installed ones: a site from tests/envs.py)."""
    e = dict(os.environ)
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([*map(str, sites), str(REPO)])
    return subprocess.run([sys.executable, str(PROGRAMS / f"{name}.py"), *args], capture_output=True, text=True,
                          env=e, timeout=600)


def _last_json(res: subprocess.CompletedProcess) -> Any:
    return json.loads(res.stdout.strip().splitlines()[-1])


def _finding(report: dict, fid: str) -> list[dict]:
    return [f for f in report["findings"] if f["id"] == fid]


# ---------------------------------------------------------------------------------------------------------------
# What the installed transformers says
# ---------------------------------------------------------------------------------------------------------------


def test_mapping_window_and_defaults_are_read_from_the_installed_transformers(t522: Path) -> None:
    """kernelcheck's reading of the Hub mapping equals transformers' own mapping objects (5.22.2, where
    kernels is usable so `get_kernel_mapping_transformers()` exists), and the window is its constants."""
    res = _run_program("hub_mapping", sites=(t522,), env={"HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    got = _last_json(res)
    assert got["equal"], got
    assert got["n"] > 20
    assert got["window"] == got["real_window"] == ["0.17.2", "0.18.0"]
    assert got["met"] is True
    assert got["use_kernels_default"] is False


def test_installed_transformers_window_not_met_is_reported(tmp_path: Path) -> None:
    """transformers 5.24 + kernels 0.17.2: the section says the window is not met, reads the use_kernels
    default from the source, and says Hub kernels are not used; alone it changes no exit code."""
    from transformers.utils import import_utils

    code, data = run_json(["hub", "--model", "qwen3.8-27b"], env=_cache(tmp_path, OTHER_TORCH))
    hub = data["hub"]
    assert code == 3, data["findings"]  # hub decides nothing when Hub kernels are not used (hub-decides-nothing)
    assert hub["used"] is False
    t = hub["transformers"]
    assert t["window"] == f">={import_utils.KERNELS_MIN_VERSION},<{import_utils.KERNELS_MAX_VERSION}"
    assert t["window_met"] is False and t["kernels"] == "0.17.2"
    assert t["use_kernels_default"] is False and "modeling_utils.py line" in t["use_kernels_source"]
    assert t["use_hub_kernels"] == "YES" and t["hub_enabled_by_env"] is True
    # CPU torch: the transformers mapping has nothing for cpu, said per name
    row = next(r for r in hub["names"] if r["name"] == "RMSNormGated")
    assert (row["kind"], row["mapped"], row["path"]) == ("layer", True, "torch") and hub["device"] == "cpu"
    assert {m["device"] for m in hub["mapping"] if m["name"] == "RMSNormGated"} == {"cuda", "xpu"}


def test_use_hub_kernels_off_is_reported(tmp_path: Path, t522: Path) -> None:
    env = {**_cache(tmp_path, MATCHING), "USE_HUB_KERNELS": "0"}
    code, data = run_json(["hub", "--model", "qwen3.8-27b", "--use-kernels", "--device", "cuda"], t522, env=env)
    assert data["hub"]["used"] is False
    assert data["hub"]["why"] and data["hub"]["transformers"]["hub_enabled_by_env"] is False
    assert _finding(data, "hub-not-used")


# ---------------------------------------------------------------------------------------------------------------
# doctor: a cache holding only builds for another torch, and one with a matching build
# ---------------------------------------------------------------------------------------------------------------


def test_doctor_reports_the_miss_with_every_reason_and_the_nearest_build(tmp_path: Path, t522: Path) -> None:
    """Done-criterion 1: the cache has only torch 2.9/2.10 CUDA builds; the job uses Hub kernels
    (--hub = use_kernels=True, transformers 5.22.2 accepts kernels 0.17.2): a silent slow path, exit 3."""
    env = _cache(tmp_path, OTHER_TORCH)
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], t522, env=env)
    assert code == 3 and data["verdict"] == "fallback"
    misses = _finding(data, "hub-no-variant")
    assert {m["severity"] for m in misses} == {"fallback"}
    fla = next(m for m in misses if "chunk_gated_delta_rule" in m["functions"])
    assert "download.pytorch.org/whl/cu128" in fla["fix"]
    repo = next(r for r in data["hub"]["repos"] if r["repo_id"] == "kernels-community/fla")
    assert repo["version"] == 1  # 5.22.2 maps fla v1
    assert repo["source"] == "hf-cache" and repo["chosen"] is None
    assert len(repo["decisions"]) == 2 and not any(d["accepted"] for d in repo["decisions"])
    assert {d["variant"]: d["reason"] for d in repo["decisions"]} == {  # kernels' own reasons
        f"torch{v.replace('.', '')}-cxx11-cu12{c}-x86_64-linux":
            f"Torch version ({v}) does not match environment Torch version (2.13)"
        for v, c in (("2.9", 6), ("2.10", 8))}
    assert repo["nearest"] == "torch210-cxx11-cu128-x86_64-linux"
    assert repo["would_match"] == "torch 2.10 (cxx11 ABI) built for CUDA 12.8 or a later 12.x, on x86_64-linux"
    rows = {r["name"]: r for r in data["hub"]["names"]}
    assert rows["RMSNormGated"]["nearest"] == rows["chunk_gated_delta_rule"]["nearest"] == repo["nearest"]
    # the text report says the same
    res = run(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], t522, env=env)
    assert res.returncode == 3
    nearest = "NO BUILD for this torch/CUDA (nearest: torch210-cxx11-cu128-x86_64-linux)"
    assert nearest in res.stdout  # wording: renderer test
    # (each rejected build is a line too, from the decisions above: worded in tests/unit/test_hub_text.py)


def test_rejection_reasons_are_kernels_own(tmp_path: Path) -> None:
    """The reasons kernelcheck lists are the lines the real kernels prints when get_kernel fails."""
    env = _cache(tmp_path, OTHER_TORCH)
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v2"], env=env)
    assert code == 3
    reasons = [d["reason"] for d in data["hub"]["repos"][0]["decisions"]]
    res = _run_program("hub_get_kernel", "kernels-community/fla", "2", env=env)
    assert res.stdout.split()[:2] == ["FAILED", "FileNotFoundError"], (res.stdout, res.stderr[-2000:])
    assert "Cannot find a build variant for this system" in res.stdout, res.stderr  # wording: kernels' own message
    for r in reasons:
        assert r in res.stdout


def test_doctor_reports_the_build_that_will_be_used(tmp_path: Path, t522: Path) -> None:
    """Done-criterion 2: a build for this torch (2.13 CPU) is in the cache: doctor names it, the functions
    the Hub kernel replaces become fast, exit 0."""
    env = _cache(tmp_path, MATCHING)
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], t522, env=env)
    assert code == 0, [f for f in data["findings"] if f["severity"] != "info"]
    assert not _finding(data, "hub-no-variant")
    fla = next(r for r in data["hub"]["repos"] if r["repo_id"] == "kernels-community/fla")
    assert fla["chosen"] == "torch213-cxx11-cpu-x86_64-linux"  # exact torch build beats torch-universal
    assert [d["variant"] for d in fla["decisions"] if d["accepted"]] == ["torch213-cxx11-cpu-x86_64-linux",
                                                                         "torch-universal"]
    f = function(data, "chunk_gated_delta_rule")
    assert f["status"] == "fast" and "Hub kernel kernels-community/fla@v1" in f["implementation"]
    row = next(r for r in data["hub"]["names"] if r["name"] == "RMSNormGated")
    assert {k: row[k] for k in ("kind", "repo", "layer", "variant", "source", "path")} == {
        "kind": "layer", "repo": "kernels-community/fla@v1", "layer": "FusedRMSNormGated",
        "variant": "torch213-cxx11-cpu-x86_64-linux", "source": "hf-cache", "path": "hub"}
    assert {r["name"]: r["path"] for r in data["hub"]["names"]}["chunk_gated_delta_rule"] == "hub"


def test_torch_universal_build_is_chosen_when_it_is_the_only_fit(tmp_path: Path, t522: Path) -> None:
    env = _cache(tmp_path, ["torch29-cxx11-cu126-x86_64-linux", "torch-universal"])
    code, data = run_json(["hub", "--model", "qwen3.8-27b", "--use-kernels", "--device", "cuda"], t522, env=env)
    assert code == 0
    assert {r["chosen"] for r in data["hub"]["repos"]} == {"torch-universal"}


def test_hub_asked_but_kernels_outside_the_window_is_broken(tmp_path: Path) -> None:
    """transformers 5.24's set_use_kernels raises ValueError when kernels is outside its window."""
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"],
                          env=_cache(tmp_path, MATCHING))
    assert code == 4
    (f,) = _finding(data, "hub-kernels-unusable")
    t = data["hub"]["transformers"]
    assert f["severity"] == "broken" and t["window_met"] is False and t["refuses_when_unusable"] is True
    assert "kernels>=0.18.2,<0.19.0" in f["fix"]


def test_offline_without_the_kernel_in_the_cache_is_broken(tmp_path: Path, t522: Path) -> None:
    """kernels raises ValueError (version not in the local cache) instead of falling back: the load fails."""
    env = {"HF_HUB_CACHE": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "1"}
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], t522, env=env)
    assert code == 4
    f = _finding(data, "hub-not-listable")
    assert f and "--prefetch" in f[0]["fix"]


def test_local_kernels_answers_first(tmp_path: Path) -> None:
    path = local_repo(tmp_path / "fla-local", ["torch29-cxx11-cu126-x86_64-linux", "torch-universal"], name="fla")
    env = {**_cache(tmp_path, OTHER_TORCH), "LOCAL_KERNELS": f"kernels-community/fla={path}"}
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v2"], env=env)
    assert code == 0
    r = data["hub"]["repos"][0]
    assert r["source"] == "LOCAL_KERNELS" and r["chosen"] == "torch-universal" and r["location"] == str(path)


# ---------------------------------------------------------------------------------------------------------------
# prefetch + lock, then kernels loads exactly that build offline
# ---------------------------------------------------------------------------------------------------------------


def test_prefetch_offline_writes_a_kernels_lock_that_kernels_loads(tmp_path: Path) -> None:
    env = _cache(tmp_path, MATCHING)
    lock = tmp_path / "job"
    lock.mkdir()
    code, data = run_json(["hub", "--model", "qwen3.8-27b", "--device", "cuda", "--prefetch", "--lock", str(lock)],
                          env=env)
    assert code == 0, data
    plan = data["plan"]
    assert {s["action"] for s in plan if s["package"] in HUB_REPOS} == {"cached"}
    assert {s["spec"] for s in plan if s["package"] in HUB_REPOS} == {
        "kernels-community/activation@v1/torch213-cxx11-cpu-x86_64-linux",
        "kernels-community/fla@v2/torch213-cxx11-cpu-x86_64-linux",
        "kernels-community/mamba-ssm@v5/torch213-cxx11-cpu-x86_64-linux"}
    assert plan[-1]["action"] == "lock" and plan[-1]["spec"] == str(lock / "kernels.lock")
    res = _run_program("hub_load_lock", str(lock / "kernels.lock"), "kernels-community/fla", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    got = _last_json(res)
    assert got["locked"] == ["kernels-community/activation", "kernels-community/fla", "kernels-community/mamba-ssm"]
    assert "/build/torch213-cxx11-cpu-x86_64-linux/__init__.py" in got["file"]


def test_prefetch_reports_a_missing_build(tmp_path: Path) -> None:
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v2", "--prefetch", "--lock",
                           str(tmp_path / "kernels.lock")], env=_cache(tmp_path, OTHER_TORCH))
    assert code == 3
    (step,) = data["plan"]
    assert step["action"] == "missing" and data["hub"]["repos"][0]["nearest"] == "torch210-cxx11-cu128-x86_64-linux"
    assert len(step["rejected"]) == 2 and any(f["id"] == "hub-prefetch-missing" for f in data["findings"])
    assert not (tmp_path / "kernels.lock").exists()


def test_prefetch_api_for_install(tmp_path: Path) -> None:
    """The call `install --source hub` uses: kernelcheck.hub.prefetch_model."""
    env = _cache(tmp_path, MATCHING)
    res = _run_program("hub_prefetch_model", "qwen3.8-27b", "--mode", "train", "--device", "cuda",
                       "--lock", str(tmp_path / "k.lock"), env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    steps = _last_json(res)
    assert [s["action"] for s in steps] == ["cached", "cached", "cached", "lock"]  # activation, fla, mamba-ssm
    assert all(s["source"] == "hub" for s in steps)


def test_bad_repo_and_option_misuse_exit_2(tmp_path: Path) -> None:
    res = run(["hub", "--repo", "not-a-repo"], env={"HF_HUB_CACHE": str(tmp_path)})
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "is not ORG/NAME" in res.stderr  # wording: renderer test
    res = run(["hub", "--repo", "kernels-community/fla"], env={"HF_HUB_CACHE": str(tmp_path)})
    assert res.returncode == 2 and "needs a version or revision" in res.stderr  # wording: renderer test
    res = run(["hub", "--model", "qwen3.8-27b", "--lock", "x"], env={"HF_HUB_CACHE": str(tmp_path)})
    assert res.returncode == 2 and "go with --prefetch" in res.stderr  # wording: renderer test


# ---------------------------------------------------------------------------------------------------------------
# after loading: was the Hub kernel really applied?
# ---------------------------------------------------------------------------------------------------------------



def _applied(env: dict[str, str], *sites: Path) -> dict:
    res = _run_program("hub_applied", sites=sites, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    got: dict = _last_json(res)
    return got


def test_applied_when_a_build_matches(tmp_path: Path, t522: Path) -> None:
    cache_repo(tmp_path / "hf", "kc-test/tiny-norm", ["torch-universal"], name="tiny-norm")
    got = _applied({"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, t522)
    assert got["error"] is None
    assert got["rows"]["RMSNormGated"]["status"] == "applied"
    assert "TinyRMSNormGated.forward" in got["rows"]["RMSNormGated"]["implementations"][0]
    assert got["rows"]["chunk_gated_delta_rule"]["status"] == "applied"
    assert got["norm_out"] == 2.0  # the Hub layer (x2) ran, not the torch RMSNorm (gate 0 -> 0)
    assert got["rows"]["RMSNormZeroCentered"]["status"] == "original"  # not mapped: kept, not expected


def test_silently_kept_torch_forward_is_reported_missed(tmp_path: Path, t522: Path) -> None:
    """Only a torch 2.9 build: kernelize (fallback ALL) keeps the torch forward and says nothing visible."""
    cache_repo(tmp_path / "hf", "kc-test/tiny-norm", ["torch29-cxx11-cu126-x86_64-linux"], name="tiny-norm")
    got = _applied({"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, t522)
    assert got["error"] is None  # no exception: the silent case
    assert got["rows"]["RMSNormGated"]["status"] == "missed"
    assert got["rows"]["chunk_gated_delta_rule"]["status"] == "missed"
    assert got["norm_out"] == 0.0
    assert any(line.startswith("MISSED   layer    RMSNormGated: 0/1") for line in got["lines"])


def test_applied_is_empty_when_transformers_ignores_kernels(tmp_path: Path) -> None:
    """Installed transformers 5.24 + kernels 0.17.2: set_use_kernels raises, no class carries a Hub name."""
    cache_repo(tmp_path / "hf", "kc-test/tiny-norm", ["torch-universal"], name="tiny-norm")
    got = _applied({"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert got["error"].startswith("ValueError: Kernels are not available")
    assert got["rows"] == {}
    assert "did not see a usable `kernels`" in got["lines"][0]  # wording: renderer test


# ---------------------------------------------------------------------------------------------------------------
# online: a Hub on localhost (tests/fake_hub.py) that huggingface_hub and kernels talk to unchanged
# ---------------------------------------------------------------------------------------------------------------


def _online(tmp: Path, hub_url: str, **extra: str) -> dict[str, str]:
    return {"HF_ENDPOINT": hub_url, "HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp / "cache"),
            "HF_HOME": str(tmp / "home"), **extra}


def test_online_prefetch_downloads_only_the_chosen_build_and_offline_jobs_load_it(tmp_path: Path) -> None:
    from tests.fake_hub import FakeHub, publish

    commit = publish(tmp_path / "srv", "kernels-community/fla", MATCHING, versions=(1, 2))
    with FakeHub(tmp_path / "srv") as hub:
        env = _online(tmp_path, hub.url)
        code, data = run_json(["hub", "--repo", "kernels-community/fla@v2", "--prefetch", "--lock", str(tmp_path)],
                              env=env)
        assert code == 0, data
        r = data["hub"]["repos"][0]
        assert r["source"] == "hub" and r["commit"] == commit and r["chosen"] == "torch213-cxx11-cpu-x86_64-linux"
        assert data["plan"][0]["action"] == "download"
        requested = [entry.split(" ", 1)[1] for entry in hub.log]  # "GET /api/..." per request
        assert any("/tree/" in path for path in requested)  # the variants really came from the Hub listing
    repo = tmp_path / "cache" / "kernels--kernels-community--fla"
    assert (repo / "refs" / "v2").read_text().strip() == commit  # what an offline LayerRepository(version=2) needs
    assert sorted(p.name for p in (repo / "snapshots" / commit / "build").iterdir()) == \
        ["torch213-cxx11-cpu-x86_64-linux"]  # only the chosen variant was downloaded
    # the Hub is gone: the job runs offline, through kernels' version lookup and through the lock
    offline = {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    by_version = _run_program("hub_get_kernel", "kernels-community/fla", "2", env=offline)
    assert by_version.returncode == 0, by_version.stderr[-3000:]
    by_lock = _run_program("hub_load_lock", str(tmp_path / "kernels.lock"), "kernels-community/fla", env=offline)
    assert by_lock.returncode == 0, by_lock.stderr[-3000:]
    built = "/build/torch213-cxx11-cpu-x86_64-linux/__init__.py"
    (loaded,) = by_version.stdout.strip().splitlines()  # the loaded module's file, not a FAILED line
    assert loaded.endswith(built), by_version.stdout
    assert _last_json(by_lock)["file"].count(built) == 1
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v2"], env=offline)
    assert code == 0 and data["hub"]["repos"][0]["source"] == "hf-cache"


def test_online_miss_lists_the_hub_variants(tmp_path: Path) -> None:
    from tests.fake_hub import FakeHub, publish

    publish(tmp_path / "srv", "kernels-community/fla", OTHER_TORCH, versions=(2,))
    with FakeHub(tmp_path / "srv") as hub:
        code, data = run_json(["hub", "--repo", "kernels-community/fla@v2", "--prefetch"],
                              env=_online(tmp_path, hub.url))
    assert code == 3
    r = data["hub"]["repos"][0]
    assert r["source"] == "hub" and r["nearest"] == "torch210-cxx11-cu128-x86_64-linux"
    assert data["plan"][0]["action"] == "missing"
    assert not (tmp_path / "cache" / "kernels--kernels-community--fla" / "snapshots").exists()


def test_kernels_client_check_agrees_with_kernels(tmp_path: Path, t522: Path) -> None:
    """HF_HUB_DISABLE_TELEMETRY=1: kernels 0.17.2's own Hub client sends an invalid User-Agent. doctor's
    verdict must agree with what the real kernels does against the (local) Hub."""
    from tests.fake_hub import FakeHub, publish

    publish(tmp_path / "srv", "kernels-community/fla", MATCHING, versions=(1, 2))
    publish(tmp_path / "srv", "kernels-community/mamba-ssm", MATCHING, versions=(3, 5))
    publish(tmp_path / "srv", "kernels-community/activation", MATCHING, versions=(1,))  # SiLU, through ACT2FN
    with FakeHub(tmp_path / "srv") as hub:
        env = _online(tmp_path, hub.url, HF_HUB_DISABLE_TELEMETRY="1")
        res = _run_program("hub_get_kernel", "kernels-community/fla", "2", "--trust-remote-code", env=env)
        kernels_fails = "FAILED" in res.stdout
        code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], t522, env=env)
    flagged = bool(_finding(data, "hub-client-broken"))
    assert flagged == kernels_fails, (res.stdout, data["findings"])
    if flagged:
        assert code == 4 and "unset HF_HUB_DISABLE_TELEMETRY" in _finding(data, "hub-client-broken")[0]["fix"]
    # kernelcheck's own client still resolved the variants from the Hub
    assert {r["source"] for r in data["hub"]["repos"]} == {"hub"}


def test_a_partial_cache_that_kernels_refuses_offline_is_found_and_repaired(tmp_path: Path) -> None:
    """`hf download --revision v2 --include 'build/torch213*'` style: the ref and the variant are cached, but
    huggingface_hub's cached tree lists every variant, so kernels' offline lookup calls the snapshot incomplete
    (FileNotFoundError -> kernelize keeps the torch forward). kernelcheck reports it and --prefetch repairs it."""
    from kernelcheck.integrations.kernels_hub import incomplete_snapshot
    from tests.fake_hub import FakeHub, publish

    publish(tmp_path / "srv", "kernels-community/fla", MATCHING, versions=(2,))
    with FakeHub(tmp_path / "srv") as hub:
        res = _run_program("hub_partial_download", "kernels-community/fla", "v2",
                           "build/torch213-cxx11-cpu-x86_64-linux/*", env=_online(tmp_path, hub.url))
        assert res.returncode == 0, res.stderr[-2000:]
    offline = {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    load = ("hub_get_kernel", "kernels-community/fla", "2")
    before = _run_program(*load, env=offline).stdout
    assert "FAILED FileNotFoundError" in before  # the real kernels refuses the cached build
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v2"], env=offline)
    assert code == 3
    (f,) = _finding(data, "hub-snapshot-incomplete")
    (repo,) = data["hub"]["repos"]
    assert repo["chosen"] == "torch213-cxx11-cpu-x86_64-linux" and repo["blocked"] and "--prefetch" in f["fix"]
    snapshot = Path(repo["location"])
    tree, missing = incomplete_snapshot(snapshot, snapshot.name)
    assert tree.is_file() and missing  # the tree listing names the other variants' files
    code, data = run_json(["hub", "--repo", "kernels-community/fla@v2", "--prefetch"], env=offline)
    assert code == 0 and data["plan"][0]["action"] == "cached"
    assert not tree.exists() and incomplete_snapshot(snapshot, snapshot.name)[1] == []  # the listing was removed
    after = _run_program(*load, env=offline).stdout
    assert "/build/torch213-cxx11-cpu-x86_64-linux/__init__.py" in after, after


def test_resolving_for_another_torch_and_gpu_checks_the_arch(tmp_path: Path, t522: Path) -> None:
    """A CPU build machine preparing a torch 2.10 + CUDA 12.9 image: kernels' resolver runs with those values;
    the chosen build declares archs 8.0/9.0 (metadata.json), so sm_120 fails kernels' arch check (RuntimeError,
    no fallback: broken) and sm_90 passes."""
    env = _cache(tmp_path, OTHER_TORCH)
    args = ["hub", "--model", "qwen3.8-27b", "--use-kernels", "--torch", "2.10", "--cuda", "12.9"]
    code, data = run_json([*args, "--arch", "12.0"], t522, env=env)
    assert code == 4
    (f, *_) = _finding(data, "hub-build-fails")
    fla = next(r for r in data["hub"]["repos"] if r["repo_id"] == "kernels-community/fla")
    assert fla["chosen"] == "torch210-cxx11-cu128-x86_64-linux" and fla["problem"]  # kernels' arch check fails
    assert f["severity"] == "broken" and data["environment"]["gpus"][0]["capability"] == "12.0"
    code, data = run_json([*args, "--arch", "9.0"], t522, env=env)
    assert code == 0, data["findings"]
    assert {r["chosen"] for r in data["hub"]["repos"]} == {"torch210-cxx11-cu128-x86_64-linux"}
    rejected = [d for r in data["hub"]["repos"] for d in r["decisions"] if not d["accepted"]]
    assert {d["reason"] for d in rejected} == {
        "Torch version (2.9) does not match environment Torch version (2.10)"}
    # the one --arch parser (doctor, install, hub): sm90 is 9.0; a capability no GPU has is bad input
    code, same = run_json([*args, "--arch", "sm90"], t522, env=env)
    assert code == 0 and same["environment"]["gpus"] == data["environment"]["gpus"]
    res = run([*args, "--arch", "99.9"], t522, env=env)
    assert res.returncode == 2  # its words: tests/unit/test_gate_truth.py test_every_command_rejects_an_impossible_arch


def test_exact_binding_sees_through_kernels_func_modules(t522: Path) -> None:
    """With kernels inside the window (5.22.2 + 0.17.2) every decorated function is a kernels `Func` module:
    `doctor --exact` (imports the modeling module) must still find each binding, as the static reading does."""
    _, fast = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer", "--no-hub"], t522)
    _, exact = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer", "--no-hub", "--exact"], t522)

    def view(r: dict) -> list[tuple]:
        return [(f["name"], f["status"], f["implementation"]) for f in r["functions"]]

    assert view(fast) == view(exact)
    assert function(exact, "chunk_gated_delta_rule")["implementation"].endswith("torch_chunk_gated_delta_rule")


def test_online_but_hub_unreachable_is_broken_even_with_a_cached_build(tmp_path: Path, t522: Path) -> None:
    """Not offline: kernels asks the Hub first and raises on the connection error (it never falls back to
    the cache), so a cached build does not help unless the job sets HF_HUB_OFFLINE=1."""
    env = {**_cache(tmp_path, MATCHING), "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub", "--hub-device", "cuda"], t522, env=env)
    assert code == 4
    f = _finding(data, "hub-unreachable")
    assert f and "HF_HUB_OFFLINE=1" in f[0]["fix"] and f[0]["severity"] == "broken"
    fla = next(r for r in data["hub"]["repos"] if r["repo_id"] == "kernels-community/fla")
    assert fla["chosen"] == "torch213-cxx11-cpu-x86_64-linux"  # the cached build, which kernels never reaches
    assert {r["source"] for r in data["hub"]["repos"]} == {"hf-cache"}


def test_install_source_hub_prefetches_and_writes_the_lock_in_the_wheelhouse(tmp_path: Path) -> None:
    """`kernelcheck install --source hub` is the same prefetch, from the install command (docker build stage)."""
    env = _cache(tmp_path, MATCHING)
    wh = tmp_path / "wheelhouse"
    wh.mkdir()  # a --wheelhouse you name must exist (a typo is never created)
    (tmp_path / "wh2").mkdir()
    code, data = run_json(["install", "--model", "qwen3.8-27b", "--source", "hub", "--arch", "9.0",
                           "--wheelhouse", str(wh)], env=env)
    assert code == 0, data
    assert [s["action"] for s in data["plan"]] == ["cached", "cached", "cached", "lock"]
    assert data["lock"] == str(wh / "kernels.lock") and (wh / "kernels.lock").exists()
    code, data = run_json(["install", "--model", "qwen3.8-27b", "--source", "hub", "--arch", "9.0",
                           "--wheelhouse", str(tmp_path / "wh2")], env=_cache(tmp_path / "other", OTHER_TORCH))
    assert code == 3 and any(f["id"] == "hub-prefetch-missing" for f in data["findings"])


def test_doctor_without_an_importable_kernels_package_reports_instead_of_crashing(tmp_path: Path) -> None:
    """The GPU image has no `kernels`; an import that fails (absent or broken) is a finding, never a crash."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Broken:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'kernels' or name.startswith('kernels.'):\n"
        "            raise ImportError('kernels is broken in this environment')\n"
        "sys.meta_path.insert(0, _Broken())\n")
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub-device", "cuda"], tmp_path)
    assert code == 3, data  # the functions' fallback, not an internal error
    f = [x for x in data["findings"] if x["id"] == "hub-kernels-absent"]
    assert f and f[0]["severity"] == "info"
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--hub-device", "cuda", "--hub"], tmp_path)
    assert code == 4 and any(x["id"] == "hub-kernels-absent" and x["severity"] == "broken" for x in data["findings"])
