"""doctor's import-proof cache (doctor/proofcache.py): a warm doctor imports nothing and says so, its report is
the cold one's, and any change to what the proof depends on (a package's files, its RECORD, an uninstall, the
model a folder holds) is proven again, so a package broken after a cached success is reported broken.

Real packages throughout: fla-core + triton from the test sites, the causal-conv1d stand-in distribution, real
pip, real transformers. Each test has its own KERNELCHECK_HOME, so the cache starts empty."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import function, run, run_json, site
from tests.standin import causal_conv1d_site

MODEL = ["doctor", "--model", "qwen3.8-27b", "--mode", "train"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"KERNELCHECK_HOME": str(tmp_path / "home"), **extra}


def _without_proof_note(rep: dict) -> dict:
    """The report less where its import answers came from (the one part a warm run may differ in)."""
    out = dict(rep)
    out.pop("import_proof")  # run-to-run state lives there only, never in findings
    return out


def test_warm_doctor_with_fla_reports_exactly_the_cold_report_and_says_it_came_from_the_cache(tmp_path):
    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    env = _env(tmp_path)
    code_cold, cold = run_json(MODEL, fla, env=env)
    assert cold["import_proof"]["source"] == "proven" and cold["import_proof"]["cache"] == "stored"
    stored = Path(cold["import_proof"]["file"])
    assert stored.is_file() and stored.parent == tmp_path / "home" / "import-proofs"
    code_warm, warm = run_json(MODEL, fla, env=env)
    assert warm["findings"] == cold["findings"]  # a cache hit is not a finding: CI diffs stay quiet
    assert warm["import_proof"] == {**cold["import_proof"], "source": "cache", "cache": "hit"}
    assert code_warm == code_cold
    assert _without_proof_note(warm) == _without_proof_note(cold)
    assert cold["environment"]["packages"]["fla"]["imports"] is True  # the proof really imported fla
    assert function(warm, "chunk_gated_delta_rule")["implementation"].startswith("fla.ops.gated_delta_rule")
    text = run(MODEL, fla, env=env).stdout
    note = [ln for ln in text.splitlines() if ln.startswith("cache: ")]
    assert note and cold["import_proof"]["proven_at"] in text and str(stored) in "".join(text.split())
    assert "--no-cache" in text  # wording: renderer test (the cache note's --no-cache hint)


def test_fla_made_unimportable_after_a_cached_success_is_reported_broken_and_never_cached(tmp_path):
    shared = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    mine = tmp_path / "site"  # fla-core installed here by real pip, triton and einops from the shared site
    wheels = Path.home() / ".cache" / "kernelcheck-tests" / "pypi-wheels-cp311"
    if not list(wheels.glob("fla_core-0.6.0-*.whl")):
        pytest.skip("no local fla-core 0.6.0 wheel (tests/kcfixtures.py PYPI_WHEELS)")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels),
                    "--no-deps", "--no-compile", "--target", str(mine), "fla-core==0.6.0"], check=True)
    env = _env(tmp_path)
    _, first = run_json(MODEL, mine, shared, env=env)
    assert first["environment"]["packages"]["fla"]["imports"] is True
    assert first["import_proof"]["cache"] == "stored"
    init = mine / "fla" / "__init__.py"
    init.write_text(init.read_text() + "\nraise ImportError('kc-test: fla broken after the proof')\n")
    for _ in range(2):  # the failure is proven each time, never stored
        _, rep = run_json(MODEL, mine, shared, env=env)
        fla = rep["environment"]["packages"]["fla"]
        assert fla["installed"] is True and fla["imports"] is False
        assert "kc-test: fla broken after the proof" in fla["error"]  # wording: the broken fla's own message
        assert function(rep, "chunk_gated_delta_rule")["status"] != "fast"
        assert rep["import_proof"] == {"source": "proven", "cache": "not stored", "file": None, "proven_at": None}


def _standin(tmp_path: Path) -> Path:
    return causal_conv1d_site(tmp_path / "sites")


def test_touching_a_file_changing_record_or_uninstalling_proves_again(tmp_path):
    conv = _standin(tmp_path)
    env = _env(tmp_path)
    _, cold = run_json(MODEL, conv, env=env)
    assert cold["environment"]["packages"]["causal_conv1d"]["imports"] is True
    assert cold["import_proof"]["cache"] == "stored"
    assert run_json(MODEL, conv, env=env)[1]["import_proof"]["source"] == "cache"

    init = conv / "causal_conv1d" / "__init__.py"
    st = init.stat()
    os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: same content
    _, touched = run_json(MODEL, conv, env=env)
    assert touched["import_proof"]["source"] == "proven"
    assert _without_proof_note(touched) == _without_proof_note(cold)
    assert run_json(MODEL, conv, env=env)[1]["import_proof"]["source"] == "cache"

    record = conv / "causal_conv1d-1.7.0.dist-info" / "RECORD"
    record.write_text("causal_conv1d/__init__.py,,\n")  # what a reinstall does to RECORD
    assert run_json(MODEL, conv, env=env)[1]["import_proof"]["source"] == "proven"

    shutil.rmtree(conv / "causal_conv1d")  # uninstalled (dist-info left behind, as a half-done uninstall)
    (conv / "causal_conv1d_cuda.py").unlink()
    _, gone = run_json(MODEL, conv, env=env)
    assert gone["import_proof"]["source"] == "proven"
    assert gone["environment"]["packages"]["causal_conv1d"]["imports"] is False


def test_no_cache_flag_variable_and_exact_always_prove(tmp_path):
    conv = _standin(tmp_path)
    env = _env(tmp_path)
    run_json(MODEL, conv, env=env)  # stored
    off = {"source": "proven", "cache": "off", "file": None, "proven_at": None}
    _, flag = run_json([*MODEL, "--no-cache"], conv, env=env)
    assert flag["import_proof"] == off
    _, var = run_json(MODEL, conv, env=_env(tmp_path, KERNELCHECK_IMPORT_CACHE="0"))
    assert var["import_proof"] == off
    _, exact = run_json([*MODEL, "--exact"], conv, env=env)
    assert "import_proof" not in exact  # imported in-process, as --exact always did
    _, warm = run_json(MODEL, conv, env=env)
    assert warm["import_proof"]["source"] == "cache"
    assert _without_proof_note(warm) == _without_proof_note(flag)


def test_dispatch_variable_changes_the_key(tmp_path):
    conv = _standin(tmp_path)
    env = _env(tmp_path)
    run_json(MODEL, conv, env=env)
    _, rep = run_json(MODEL, conv, env=_env(tmp_path, USE_HUB_KERNELS="0"))
    assert rep["import_proof"]["source"] == "proven"
    _, rep = run_json(MODEL, conv, env=_env(tmp_path, CUDA_VISIBLE_DEVICES=""))
    assert rep["import_proof"]["source"] == "proven"


def test_same_folder_now_holding_another_model_is_proven_in_a_fresh_interpreter(tmp_path):
    """The cache is found before the steps are known (the folder's path is the query): when its config now names
    another model type, the stored steps differ and a new interpreter proves the new ones."""
    conv = _standin(tmp_path)
    env = _env(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_next"}))
    args = ["doctor", "--model", str(model)]
    _, first = run_json(args, conv, env=env)
    assert first["import_proof"]["cache"] == "stored" and first["model"]["model_type"] == "qwen3_next"
    (model / "config.json").write_text(json.dumps({"model_type": "lfm2"}))
    _, other = run_json(args, conv, env=env)
    assert other["model"]["model_type"] == "lfm2"
    assert other["import_proof"]["source"] == "proven" and other["import_proof"]["cache"] == "stored"
    _, fresh = run_json([*args, "--no-cache"], conv, env=env)
    assert _without_proof_note(other) == _without_proof_note(fresh)
    _, warm = run_json(args, conv, env=env)
    assert warm["import_proof"]["source"] == "cache"
    assert _without_proof_note(warm) == _without_proof_note(fresh)
