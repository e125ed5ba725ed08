"""The gate's import proof baked into a folder (warm/proofs.py `bake`, what `kernelcheck warm` runs after its model
run) and found by a real doctor process on a "node": only `warm --print-env`'s variables, an empty
KERNELCHECK_HOME, another HOME, another current folder. A hit imports nothing (no child: the proof's answers are
used) and says it was proven at bake time, with when; a changed file of a kernel package or a changed variable of
the key is a miss, proven afresh and stored in the node's own home, never in the baked folder.

Real packages: the causal-conv1d stand-in distribution (tests/standin.py), real transformers. The JIT probes of a
bake need a GPU: tests/unit/test_baked_proofs.py (stand-in probe process) and benchmarks/gpu/gpu_warm.sh gate."""

from __future__ import annotations

import os
from pathlib import Path

from kernelcheck.core import matrix
from kernelcheck.integrations import jit_caches
from kernelcheck.warm import proofs
from tests.envs import REPO, run, run_json
from tests.standin import causal_conv1d_site

MODEL = ["doctor", "--model", "qwen3.8-27b", "--mode", "train"]
SPEC = {"model": "qwen3.8-27b", "mode": "train"}


def _user_env(*sites: Path) -> dict[str, str]:
    """The environment tests/envs.py `run` gives its processes (the user's; PYTHON* variables are in the key)."""
    e = dict(os.environ)
    e.pop("KERNELCHECK_DEBUG", None)
    rest = [e["PYTHONPATH"]] if e.get("PYTHONPATH") else []
    e["PYTHONPATH"] = os.pathsep.join([*map(str, sites), str(REPO), *rest])
    e.setdefault("HF_HUB_OFFLINE", "1")
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    return e


def _bake(tmp_path: Path, site: Path) -> tuple[dict[str, str], dict]:
    """warm's proof step into tmp_path/jit-cache, from its own HOME and folder; the printed variables, its result."""
    folder = tmp_path / "jit-cache"
    printed = jit_caches.env_for(str(folder), matrix.load().table("jit_caches.toml"), False)
    build_home = tmp_path / "build-home"
    build_home.mkdir()
    (tmp_path / "build-wd").mkdir()
    env = proofs.job_env(str(folder), printed, {**_user_env(site), "HOME": str(build_home)})
    got = proofs.bake(SPEC, env, gpu=False, cwd=str(tmp_path / "build-wd"))
    return printed, got


def _node(tmp_path: Path, printed: dict[str, str], **extra: str) -> tuple[dict[str, str], Path]:
    home = tmp_path / "node-home"
    home.mkdir(exist_ok=True)
    (tmp_path / "node-wd").mkdir(exist_ok=True)
    return {**printed, "HOME": str(home), "KERNELCHECK_HOME": str(home / "kc"), **extra}, tmp_path / "node-wd"


def test_a_node_finds_the_import_proof_baked_into_the_folder_and_says_it_was_proven_at_bake_time(tmp_path):
    site = causal_conv1d_site(tmp_path / "sites")
    printed, baked = _bake(tmp_path, site)
    assert baked["static"]["ok"] is True and baked["static"]["import_proof"] == "stored"
    stored = list((tmp_path / "jit-cache" / "kernelcheck" / "import-proofs").glob("*.json"))
    assert len(stored) == 1
    assert printed["KERNELCHECK_PROOF_DIR"] == str(tmp_path / "jit-cache" / "kernelcheck")

    env, wd = _node(tmp_path, printed)
    code, rep = run_json(MODEL, site, env=env, cwd=wd)
    proof = rep["import_proof"]
    assert proof["source"] == "cache" and proof["cache"] == "baked"  # the stored answers: no import child ran
    assert proof["file"] == str(stored[0]) and proof["proven_at"]
    assert rep["environment"]["packages"]["causal_conv1d"]["imports"] is True  # the bake's answer, used here
    assert not (tmp_path / "node-home" / "kc").exists()  # a hit writes nothing on the node
    text = run(MODEL, site, env=env, cwd=wd).stdout
    note = " ".join(ln for ln in text.splitlines() if ln.startswith("cache: "))
    assert "bake time" in note and proof["proven_at"] in note and "not proven on this node" in note

    # --no-cache and --exact prove afresh on the node
    _, fresh = run_json([*MODEL, "--no-cache"], site, env=env, cwd=wd)
    assert fresh["import_proof"]["cache"] == "off"
    _, exact = run_json([*MODEL, "--exact"], site, env=env, cwd=wd)
    assert "import_proof" not in exact
    assert fresh["findings"] == rep["findings"] == exact["findings"]


def test_a_changed_kernel_file_or_key_variable_on_the_node_is_proven_afresh_and_stored_in_its_home(tmp_path):
    site = causal_conv1d_site(tmp_path / "sites")
    printed, _ = _bake(tmp_path, site)
    baked = sorted((tmp_path / "jit-cache" / "kernelcheck" / "import-proofs").glob("*.json"))
    env, wd = _node(tmp_path, printed)

    _, var = run_json(MODEL, site, env={**env, "FLA_TILELANG": "0"}, cwd=wd)  # a dispatch variable of the key
    assert var["import_proof"]["source"] == "proven" and var["import_proof"]["cache"] == "stored"
    assert Path(var["import_proof"]["file"]).parent == tmp_path / "node-home" / "kc" / "import-proofs"

    init = site / "causal_conv1d" / "__init__.py"
    st = init.stat()
    os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the package's file changed on the node
    _, touched = run_json(MODEL, site, env=env, cwd=wd)
    assert touched["import_proof"]["source"] == "proven" and touched["import_proof"]["cache"] == "stored"
    assert sorted((tmp_path / "jit-cache" / "kernelcheck" / "import-proofs").glob("*.json")) == baked  # read only
    _, again = run_json(MODEL, site, env=env, cwd=wd)
    assert again["import_proof"]["cache"] == "hit"  # the node's own proof now, not the baked one
