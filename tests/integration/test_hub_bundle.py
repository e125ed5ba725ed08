"""`kernelcheck hub --bundle FILE` / `--verify-bundle FILE`: an air-gapped Kernel Hub bundle, built against the
local stand-in Hub (tests/fake_hub.py: the real huggingface_hub and kernels talk to it over HTTP), moved to an
"offline" environment (HF_HUB_OFFLINE=1, an empty cache) and checked there with the real kernels releases 0.19.1,
0.18.3 (test sites) and 0.17.2 (this venv). The round trip ends with the real `kernels.get_kernel` loading the build
offline from the unpacked bundle, and kernels' own digest check raising where --verify-bundle said BROKEN.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.envs import REPO, run, run_json, site
from tests.fake_hub import FakeHub, organization, publish
from tests.unit.test_json_schemas import validate

pytestmark = pytest.mark.integration

CPU = "torch213-cxx11-cpu-x86_64-linux"
OTHER = ["torch29-cxx11-cu126-x86_64-linux", "torch210-cxx11-cu128-x86_64-linux"]
REPO_ID = "kernels-community/activation"
K019 = ("kernels==0.19.1", "tomlkit")
K018 = ("kernels==0.18.3", "tomlkit")
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def _online(tmp: Path, url: str) -> dict[str, str]:
    return {"HF_ENDPOINT": url, "HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp / "build-cache"),
            "HF_HOME": str(tmp / "home")}


def _offline(tmp: Path) -> dict[str, str]:
    """The air-gapped node: no Hub, an empty cache of its own."""
    (tmp / "node-cache").mkdir(exist_ok=True)
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp / "node-cache"), "HF_HOME": str(tmp / "node-home"),
            "HF_ENDPOINT": "http://127.0.0.1:9"}


def _digest(variant: Path, wrong: str | None = None) -> None:
    """Record a sha256 digest of the variant's files in its metadata.json, in kernels' format (base64 sha256 per
    file, metadata.json itself excluded); `wrong`: that file's hash is recorded wrong (a modified build)."""
    files = {}
    for f in sorted(variant.rglob("*")):
        if f.is_file() and f.name != "metadata.json":
            data = f.read_bytes() + (b"#changed" if f.name == wrong else b"")
            files[str(f.relative_to(variant))] = base64.b64encode(hashlib.sha256(data).digest()).decode()
    meta = json.loads((variant / "metadata.json").read_text())
    meta["digest"] = {"algorithm": "sha256", "files": files}
    (variant / "metadata.json").write_text(json.dumps(meta))


def _publish(srv: Path, variants: list[str], *, digest: str | None = "ok", repo: str = REPO_ID) -> str:
    commit = publish(srv, repo, variants, versions=(1,))
    organization(srv, "kernels-community", trusted=True)
    org, name = repo.split("/")
    for v in variants:
        if digest is not None:
            _digest(srv / org / name / commit / "build" / v, wrong="layers.py" if digest == "wrong" else None)
    return commit


def _build(tmp: Path, *sites: Path, variants: list[str] | None = None, digest: str | None = "ok",
           args: tuple[str, ...] = ("--repo", f"{REPO_ID}@v1")) -> tuple[int, dict, Path]:
    out = tmp / "kernels.tar.gz"
    _publish(tmp / "srv", variants or [CPU, *OTHER], digest=digest)
    with FakeHub(tmp / "srv") as hub:
        code, data = run_json(["hub", *args, "--bundle", str(out)], *sites, env=_online(tmp, hub.url))
    return code, data, out


def _finding(data: dict, fid: str) -> list[dict]:
    return [f for f in data["findings"] if f["id"] == fid]


def _load_offline(bundle: Path, tmp: Path, *sites: Path) -> str:
    """Unpack the bundle on the 'node' and load the kernel with the real kernels.get_kernel, offline."""
    node = tmp / "unpacked"
    node.mkdir(exist_ok=True)
    with tarfile.open(bundle) as tar:
        tar.extractall(node, filter="data")
    e = dict(os.environ)
    e.update(_offline(tmp))
    e["KERNELS_CACHE"] = str(node / "cache")
    e["PYTHONPATH"] = os.pathsep.join([*map(str, sites), str(REPO)])
    res = subprocess.run([sys.executable, str(PROGRAMS / "hub_get_kernel.py"), REPO_ID, "1"], capture_output=True,
                         text=True, env=e, timeout=600)
    return res.stdout + res.stderr


def test_round_trip_builds_verifies_offline_and_the_real_kernels_loads_it(tmp_path: Path) -> None:
    k019 = site(*K019)
    code, data, bundle = _build(tmp_path, k019)
    assert code == 0, data["findings"]
    assert validate(data) == "hub-bundle" and data["action"] == "bundle"
    (e,) = data["entries"]
    assert (e["repo_id"], e["version"], e["variant"], e["status"]) == (REPO_ID, 1, CPU, "bundled")
    assert len(e["commit"]) == 40 and e["ref"] == "v1"
    assert set(e["why"]["rejected"]) == set(OTHER)  # kernels' resolver's reasons for the losers
    assert e["digest"]["status"] == "ok" and e["redirect"]["status"] == "ok" and e["depends"] == []
    assert e["trust"]["status"] == "ok"  # kernels' own check asked the (stand-in) Hub's organisation page
    assert any(f.endswith(f"build/{CPU}/layers.py") for f in e["files"])
    assert data["job_environment"]["HF_HUB_OFFLINE"] == "1"
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    assert "kernelcheck-bundle.json" in names and "kernels.lock" in names
    assert "cache/kernels--kernels-community--activation/refs/v1" in names
    assert not any(OTHER[0] in n for n in names)  # only the chosen variant travels

    code, data = run_json(["hub", "--verify-bundle", str(bundle)], k019, env=_offline(tmp_path))
    assert code == 0, data["findings"]
    assert validate(data) == "hub-bundle" and data["action"] == "verify-bundle"
    assert data["verdict"] == "ready" and data["kernels"] == "0.19.1"
    (c,) = data["checks"]
    assert c["present"] and c["version_lookup"] == "ok" and c["resolved_variant"] == CPU
    assert c["digest"]["status"] == "ok" and c["trust"]["status"] == "skipped"
    assert c["receipt"]["status"] == "missing"  # the stand-in builds are unsigned: no receipt was earned
    assert _finding(data, "hub-bundle-signature")[0]["severity"] == "warning"
    assert not os.listdir(tmp_path / "node-cache")  # verifying changed nothing on the node
    loaded = _load_offline(bundle, tmp_path, k019)
    assert f"/build/{CPU}/__init__.py" in loaded and "FAILED" not in loaded, loaded


def test_a_digest_mismatch_is_broken_and_the_real_kernels_raises(tmp_path: Path) -> None:
    k019 = site(*K019)
    code, data, bundle = _build(tmp_path, k019, digest="wrong")
    assert code == 4 and data["entries"][0]["digest"]["status"] == "failed"
    assert _finding(data, "hub-bundle-digest")
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], k019, env=_offline(tmp_path))
    assert code == 4 and data["verdict"] == "broken"
    (f,) = _finding(data, "hub-bundle-digest")
    assert f["severity"] == "broken" and "layers.py" in f["message"]
    loaded = _load_offline(bundle, tmp_path, k019)
    assert "FAILED RuntimeError" in loaded and "digest" in loaded, loaded  # kernels agrees: the load raises


def test_a_repository_without_a_variant_for_the_target_makes_the_bundle_broken(tmp_path: Path) -> None:
    k019 = site(*K019)
    code, data, bundle = _build(tmp_path, k019, variants=OTHER)
    assert code == 4
    (e,) = data["entries"]
    assert e["status"] == "missing" and e["variant"] is None
    assert _finding(data, "hub-bundle-missing")[0]["severity"] == "broken"
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], k019, env=_offline(tmp_path))
    assert code == 4 and {f["id"] for f in data["findings"]} >= {"hub-bundle-missing"}


def test_a_variant_removed_from_the_bundle_is_named(tmp_path: Path) -> None:
    """A bundle whose variant files were dropped in transit (repacked without build/): the manifest still names it."""
    k019 = site(*K019)
    code, _, bundle = _build(tmp_path, k019)
    assert code == 0
    cut = tmp_path / "cut.tar.gz"
    with tarfile.open(bundle) as src, tarfile.open(cut, "w:gz") as dst:
        for m in src.getmembers():
            if f"/build/{CPU}" not in m.name:
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    code, data = run_json(["hub", "--verify-bundle", str(cut)], k019, env=_offline(tmp_path))
    assert code == 4
    ids = {f["id"] for f in data["findings"]}
    assert "hub-bundle-missing" in ids and "hub-bundle-files-changed" in ids


def test_unstable_kernels_all_latest_is_reported(tmp_path: Path) -> None:
    k019 = site(*K019)
    _, _, bundle = _build(tmp_path, k019)
    env = {**_offline(tmp_path), "UNSTABLE_KERNELS_ALL_LATEST": "1"}
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], k019, env=env)
    (f,) = _finding(data, "hub-bundle-all-latest")
    assert f["severity"] == "warning" and code == 0  # the bundle holds only the pinned version: same builds
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], k019, env=_offline(tmp_path))
    assert not _finding(data, "hub-bundle-all-latest")
    # kernels 0.18.3 has no such switch: said, and the pinned versions load
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], site(*K018), env=env)
    assert _finding(data, "hub-bundle-all-latest")[0]["severity"] == "info"


def test_kernels_0_18_checks_the_digest_and_0_17_says_not_checked(tmp_path: Path) -> None:
    _, _, bundle = _build(tmp_path, site(*K019), digest="wrong")
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], site(*K018), env=_offline(tmp_path))
    assert code == 4 and data["kernels"] == "0.18.3" and _finding(data, "hub-bundle-digest")
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], env=_offline(tmp_path))  # this venv: 0.17.2
    assert data["kernels"] == "0.17.2" and code == 0
    notes = _finding(data, "hub-bundle-not-checked")
    assert {n["severity"] for n in notes} == {"info"} and any("digest" in n["message"] for n in notes)


def test_a_corrupt_or_foreign_file_is_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tar file at all")
    res = run(["hub", "--verify-bundle", str(bad)], env=_offline(tmp_path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    other = tmp_path / "other.tar"
    with tarfile.open(other, "w") as tar:
        tar.add(__file__, arcname="x.py")
    res = run(["hub", "--verify-bundle", str(other)], env=_offline(tmp_path))
    assert res.returncode == 2 and "not a kernelcheck bundle" in res.stderr
    res = run(["hub", "--bundle", str(tmp_path / "b.tgz")], env=_offline(tmp_path))
    assert res.returncode == 2  # --bundle without --model/--repo


def _store_receipt(cache: Path, repo_id: str, commit: str, variant: str, *sites: Path) -> None:
    """What an earlier online load on the build machine left: kernels' own signature receipt in its cache."""
    code = ("import sys; from kernels._rust import KernelLocation, Oid, SignatureReceipt, SignatureReceiptStore; "
            "SignatureReceiptStore.in_kernels_cache().store(SignatureReceipt(KernelLocation.remote(sys.argv[1], "
            "Oid.from_str(sys.argv[2]), sys.argv[3])))")
    e = dict(os.environ, KERNELS_CACHE=str(cache), PYTHONPATH=os.pathsep.join(map(str, sites)))
    subprocess.run([sys.executable, "-c", code, repo_id, commit, variant], check=True, env=e, timeout=300)


def test_a_model_bundle_from_the_cache_carries_the_receipt_it_holds(tmp_path: Path) -> None:
    """--model: the repositories come from the Hub prediction; built offline from this machine's cache. fla's
    signature was verified here before (kernels' receipt in the cache): the bundle carries it; mamba-ssm's was
    not: no receipt, said offline. The whole load also resolves activation@v1 (SiLU, through ACT2FN): bundled too."""
    from tests.kernel_repos import cache_repo

    k019 = site(*K019)
    cache = tmp_path / "hf"
    repos = ("kernels-community/fla", "kernels-community/mamba-ssm", REPO_ID)
    commits = {r: cache_repo(cache, r, [CPU, *OTHER]) for r in repos}
    fla = cache / "kernels--kernels-community--fla" / "snapshots" / commits["kernels-community/fla"] / "build" / CPU
    (fla / "metadata.json.sigstore").write_text("{}")
    _store_receipt(cache, "kernels-community/fla", commits["kernels-community/fla"], CPU, k019)
    out = tmp_path / "b.tar.gz"
    code, data = run_json(["hub", "--model", "qwen3.8-27b", "--device", "cuda", "--bundle", str(out)], k019,
                          env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "h")})
    assert code == 0, data["findings"]
    assert validate(data) == "hub-bundle" and data["model"] == "qwen3.8-27b" and data["device"] == "cuda"
    got = {e["repo_id"]: e for e in data["entries"]}
    assert set(got) == set(repos)
    assert {e["source"] for e in got.values()} == {"hf-cache"} and got["kernels-community/fla"]["required_by"]
    assert got["kernels-community/fla"]["trust"]["status"] == "skipped"  # offline build: not asked
    code, data = run_json(["hub", "--verify-bundle", str(out)], k019, env=_offline(tmp_path))
    receipts = {c["spec"].split("@")[0]: c["receipt"]["status"] for c in data["checks"]}
    assert receipts == {"kernels-community/fla": "ok", "kernels-community/mamba-ssm": "missing", REPO_ID: "missing"}
    sig = {f["message"].split("@")[0]: f for f in _finding(data, "hub-bundle-signature")}
    assert "no signature receipt" not in sig["kernels-community/fla"]["message"]
    assert "no signature receipt" in sig["kernels-community/mamba-ssm"]["message"]
    assert code == 0  # kernels warns on a signature it cannot verify, and loads


def test_a_bundle_for_another_torch_and_gpu_is_checked_for_that_target(tmp_path: Path) -> None:
    """A CPU build box preparing an H100 image (--torch 2.11 --cuda 13.0 --arch 9.0): the CUDA 13.0 build is bundled
    and --verify-bundle resolves for that target (not for this CPU machine); for --arch 12.0 the build's archs
    (8.0, 9.0 in its metadata.json) fail kernels' arch check: broken at build."""
    k019 = site(*K019)
    cu130 = "torch211-cxx11-cu130-x86_64-linux"
    args = ("--repo", f"{REPO_ID}@v1", "--torch", "2.11", "--cuda", "13.0", "--arch", "9.0")
    code, data, bundle = _build(tmp_path, k019, variants=[cu130, CPU], args=args)
    assert code == 0, data["findings"]
    assert data["entries"][0]["variant"] == cu130 and data["target"] == {"torch": "2.11", "cuda": "13.0"}
    code, data = run_json(["hub", "--verify-bundle", str(bundle)], k019, env=_offline(tmp_path))
    assert code == 0 and data["checks"][0]["resolved_variant"] == cu130, data["findings"]
    other = tmp_path / "sm120"
    other.mkdir()
    code, data, _ = _build(other, k019, variants=[cu130, CPU], args=(*args[:-1], "12.0"))
    assert code == 4 and _finding(data, "hub-bundle-variant")[0]["severity"] == "broken"


def test_a_local_kernels_override_travels_and_the_job_environment_names_it(tmp_path: Path) -> None:
    """LOCAL_KERNELS on the build machine (kernels reads it first): the folder is bundled under local/ and the
    job environment says LOCAL_KERNELS=REPO=<DIR>/local/...; the real kernels loads it from there, offline."""
    from tests.kernel_repos import local_repo

    k019 = site(*K019)
    src = local_repo(tmp_path / "dev-activation", [CPU], name="activation")
    out = tmp_path / "b.tar.gz"
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf"), "LOCAL_KERNELS": f"{REPO_ID}={src}"}
    code, data = run_json(["hub", "--repo", f"{REPO_ID}@v1", "--bundle", str(out)], k019, env=env)
    assert code == 0, data["findings"]
    (e,) = data["entries"]
    assert e["status"] == "local" and e["variant"] == CPU
    local = data["job_environment"]["LOCAL_KERNELS"]
    assert local == f"{REPO_ID}=<DIR>/local/kernels-community--activation"
    code, data = run_json(["hub", "--verify-bundle", str(out)], k019, env=_offline(tmp_path))
    assert code == 0 and data["checks"] == [{"spec": f"{REPO_ID}@v1", "variant": CPU, "local": True}]
    node = tmp_path / "node"
    node.mkdir()
    with tarfile.open(out) as tar:
        tar.extractall(node, filter="data")
    e2 = dict(os.environ, **_offline(tmp_path), LOCAL_KERNELS=local.replace("<DIR>", str(node)),
              PYTHONPATH=os.pathsep.join([str(k019), str(REPO)]))
    res = subprocess.run([sys.executable, str(PROGRAMS / "hub_get_kernel.py"), REPO_ID, "1"], capture_output=True,
                         text=True, env=e2, timeout=600)
    assert f"{node}/local/kernels-community--activation/build/{CPU}/__init__.py" in res.stdout, res.stdout


def test_kernel_dependencies_are_bundled_with_their_tree(tmp_path: Path) -> None:
    """A build whose metadata.json declares kernel-depends (kernels' dependency tree): the dependency is resolved,
    bundled and checked too, and the real kernels loads the whole tree offline; a dependency the Hub lacks makes the
    bundle broken."""
    k019 = site(*K019)
    dep = "kernels-community/layer-norm"
    _publish(tmp_path / "srv", [CPU], repo=dep)
    commit = _publish(tmp_path / "srv", [CPU], digest=None)
    meta = tmp_path / "srv" / "kernels-community" / "activation" / commit / "build" / CPU / "metadata.json"
    m = json.loads(meta.read_text())
    meta.write_text(json.dumps({**m, "kernel-depends": [{"repo-id": dep, "version": 1}]}))
    out = tmp_path / "b.tar.gz"
    with FakeHub(tmp_path / "srv") as hub:
        code, data = run_json(["hub", "--repo", f"{REPO_ID}@v1", "--bundle", str(out)], k019,
                              env=_online(tmp_path, hub.url))
    assert code == 0, data["findings"]
    got = {e["repo_id"]: e for e in data["entries"]}
    assert got[REPO_ID]["dependency_tree"] == {dep: {}} and got[dep]["status"] == "bundled"
    assert got[dep]["required_by"] == f"a kernel dependency of {REPO_ID}"
    assert got[dep]["trust"]["status"] == "ok"
    code, data = run_json(["hub", "--verify-bundle", str(out)], k019, env=_offline(tmp_path))
    assert code == 0 and len(data["checks"]) == 2, data["findings"]
    loaded = _load_offline(out, tmp_path, k019)
    assert f"/build/{CPU}/__init__.py" in loaded and "FAILED" not in loaded, loaded
    # the dependency is gone from the Hub: the bundle cannot hold it
    (tmp_path / "srv" / "kernels-community" / "layer-norm" / "refs.json").unlink()
    with FakeHub(tmp_path / "srv") as hub:
        code, data = run_json(["hub", "--repo", f"{REPO_ID}@v1", "--bundle", str(tmp_path / "c.tar.gz")], k019,
                              env={**_online(tmp_path, hub.url), "HF_HUB_CACHE": str(tmp_path / "other-cache")})
    assert code == 4 and any(dep in f["message"] for f in _finding(data, "hub-bundle-missing"))


def test_an_untrusted_publisher_is_recorded_and_skipped_offline(tmp_path: Path) -> None:
    k019 = site(*K019)
    publish(tmp_path / "srv", "someone/activation", [CPU], versions=(1,))
    organization(tmp_path / "srv", "someone", trusted=False)
    out = tmp_path / "b.tar.gz"
    with FakeHub(tmp_path / "srv") as hub:
        code, data = run_json(["hub", "--repo", "someone/activation@v1", "--bundle", str(out)], k019,
                              env=_online(tmp_path, hub.url))
    (e,) = data["entries"]
    assert e["trust"]["status"] == "failed" and "not from a trusted publisher" in e["trust"]["detail"]
    code, data = run_json(["hub", "--verify-bundle", str(out)], k019, env=_offline(tmp_path))
    assert data["checks"][0]["trust"]["status"] == "skipped" and "failed" in data["checks"][0]["trust"]["detail"]


def test_a_redirect_is_read_by_kernels_and_reported(tmp_path: Path) -> None:
    """The repository's kernel-status.toml (kernels' KernelStatus) says it moved: recorded at build, a warning at
    verify (the bundle holds what the job asks for)."""
    k019 = site(*K019)
    commit = _publish(tmp_path / "srv", [CPU])
    (tmp_path / "srv" / "kernels-community" / "activation" / commit / "kernel-status.toml").write_text(
        'kind = "redirect"\ndestination = "kernels-community/activation-v2"\nrevision = "v1"\n')
    out = tmp_path / "b.tar.gz"
    with FakeHub(tmp_path / "srv") as hub:
        code, data = run_json(["hub", "--repo", f"{REPO_ID}@v1", "--bundle", str(out)], k019,
                              env=_online(tmp_path, hub.url))
    assert data["entries"][0]["redirect"] == {"status": "redirect", "detail": "kernels-community/activation-v2@v1"}
    code, data = run_json(["hub", "--verify-bundle", str(out)], k019, env=_offline(tmp_path))
    assert code == 0 and _finding(data, "hub-bundle-redirect")[0]["severity"] == "warning"
