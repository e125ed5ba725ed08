"""doctor on this CPU machine, with real torch and real transformers in every regime we claim."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck import __version__
from tests.envs import TF525, function, run, run_json, site
from tests.unit.test_report_readback import rendered

REPO = Path(__file__).resolve().parents[2]

GDN = ["chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "causal_conv1d_fn", "causal_conv1d_update"]


def test_headline_cpu_json_lists_four_non_fast_functions_and_exits_3():
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b"])
    assert code == 3, rep
    assert rep["schema"] == "kernelcheck.doctor/1"
    assert rep["command"] == "doctor" and rep["verdict"] == "fallback" and rep["exit_code"] == 3
    assert rep["model"]["id"] == "Qwen/Qwen3.8-27B" and rep["model"]["model_type"] == "qwen3_5"
    assert rep["mode"] == "train"
    env = rep["environment"]
    assert env["torch"]["version"].startswith("2.") and env["torch"]["cuda"] is None
    assert env["gpus"] == [] and env["transformers"]
    for name in GDN:
        f = function(rep, name)
        assert f["status"] != "fast"
        assert f["reason"] and not env["packages"][{"fla-core": "fla"}.get(f["package"], "causal_conv1d")]["installed"]
        assert f["fix"].startswith("kernelcheck install --model qwen3.8-27b")
        assert "torch" in f["implementation"] or "conv1d" in f["implementation"]
    assert function(rep, "chunk_gated_delta_rule")["package"] == "fla-core"
    assert function(rep, "causal_conv1d_fn")["package"] == "causal-conv1d"
    # decode functions are not used when training: listed, but marked
    assert function(rep, "fused_recurrent_gated_delta_rule")["used"] is False
    assert {f["id"] for f in rep["findings"]} >= {"torch-cpu-build"}


def test_text_report_is_readable_one_line_per_function(tmp_path):
    res = run(["doctor", "--model", "Qwen/Qwen3.8-27B", "--mode", "infer", "-o", str(tmp_path / "r.json")],
              env={"COLUMNS": "100"})  # piped, as a person's pipe is (the width rendered() wraps to)
    assert res.returncode == 3, res.stderr
    rep = json.loads((tmp_path / "r.json").read_text())  # the same run's values
    out = res.stdout
    for name in GDN:
        line = next(line for line in out.splitlines() if f" {name} " in line)
        assert line.strip().startswith("FALLBACK"), line
        fn = function(rep, name)
        assert (fn["status"], fn["used"]) == ("fallback", True)  # infer uses prefill and decode
        assert fn["fix"].startswith("kernelcheck install --model Qwen/Qwen3.8-27B")
    # the text is the renderers' from those values (their words: tests/unit/test_report_readback.py's samples)
    assert out == rendered(rep)
    assert "Traceback" not in res.stderr


def test_without_model_reports_environment_and_packages_only_and_is_never_ready():
    # a CI gate that forgets --model must not pass: nothing was checked, so the verdict is not READY
    code, rep = run_json(["doctor"])
    assert code == 3 and rep["verdict"] == "fallback"
    (f,) = [f for f in rep["findings"] if f["id"] == "no-model"]
    assert f["severity"] == "fallback" and "--model" in f["fix"]
    assert rep["model"] is None and rep["functions"] == []
    assert set(rep["environment"]["packages"]) >= {"fla", "causal_conv1d", "mamba_ssm", "flash_attn"}
    assert rep["environment"]["packages"]["fla"]["installed"] is False


def test_python_dash_m_and_console_script_agree():
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.split()[:2] == ["kernelcheck", f"{__version__},"]


# --- transformers regimes, each installed for real -----------------------------------------------

@pytest.mark.parametrize("version,regime", [("5.14.1", "module-globals"), ("5.17.0", "decorator")])
def test_regimes_bind_torch_paths(version, regime):
    tf = site(f"transformers=={version}", deps=True)
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer"], tf)
    assert code == 3, rep
    assert rep["environment"]["transformers"] == version
    assert rep["bindings"]["regime"] == regime
    for name in GDN:
        f = function(rep, name)
        assert f["status"] == "fallback", f
        assert f["reason"] and not rep["environment"]["packages"]["fla"]["installed"]
    assert "torch_chunk_gated_delta_rule" in function(rep, "chunk_gated_delta_rule")["implementation"]


def test_transformers_5_15_decode_defect_is_named():
    tf = site("transformers==5.15.1", deps=True)
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer"], tf)
    assert code == 3
    assert rep["bindings"]["regime"] == "decorator"
    dec = function(rep, "fused_recurrent_gated_delta_rule")
    assert dec["status"] == "fallback"
    (misnamed,) = _transformers_data()["misnamed"]  # the 5.15 decode defect, data in matrix/transformers.toml
    assert dec["reason"] == misnamed["reason"].format(transformers="5.15.1") and dec["fix"] == misnamed["fix"]
    assert "transformers>=5.17" in dec["fix"]


def test_transformers_5_15_with_fla_core_only_binds_torch_even_for_prefill():
    tf = site("transformers==5.15.1", deps=True)
    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "train"], tf, fla)
    pre = function(rep, "chunk_gated_delta_rule")
    assert pre["status"] == "fallback", pre
    (root,) = _transformers_data()["root_import"]  # data in matrix/transformers.toml
    assert pre["reason"] == root["reason"].format(transformers="5.15.1", function="chunk_gated_delta_rule",
                                                  version="0.6.0")
    assert pre["fix"] == root["fix"].format(version="0.6.0") and "flash-linear-attention==0.6.0" in pre["fix"]


def test_newest_transformers_fla_without_triton_quotes_the_import_error():
    fla = site("fla-core==0.6.0", "einops")
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b"], fla)
    assert code == 3
    f = function(rep, "chunk_gated_delta_rule")
    assert f["status"] == "fallback"
    assert rep["environment"]["packages"]["fla"]["error"] == "ModuleNotFoundError: No module named 'triton'"
    # here (CPU, transformers 5.24) `pip install triton` alone turns exit 3 into exit 4
    # (fla-cpu-crash), so the fix says where it is safe and the reason says why (doctor/fixcheck.py)
    assert f["fix"].startswith("on a machine with an NVIDIA GPU") and "pip install triton" in f["fix"]
    # (the reason's note naming fla-cpu-crash is worded in tests/unit/test_fixcheck.py)
    assert rep["environment"]["packages"]["fla"]["installed"] is True
    assert rep["environment"]["packages"]["fla"]["imports"] is False
    assert any(x["id"] == "missing-triton" for x in rep["findings"])


def test_fla_with_triton_on_cpu_is_broken_under_5_24():
    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer"], fla)
    assert code == 4, rep
    assert rep["verdict"] == "broken"
    f = function(rep, "chunk_gated_delta_rule")
    assert f["status"] == "broken"
    assert f["implementation"].startswith("fla.ops.gated_delta_rule")
    assert any(x["id"] == "fla-cpu-crash" and x["severity"] == "broken" and "chunk_gated_delta_rule" in x["functions"]
               for x in rep["findings"])


KERNEL_IMPORTS = ("fla", "triton", "causal_conv1d", "mamba_ssm", "tilelang", "flash_attn")


def _imported_here(stderr: str) -> set[str]:
    """Top-level packages in doctor's own `-X importtime` lines (its import children write elsewhere)."""
    return {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in stderr.splitlines()
            if ln.startswith("import time:") and "|" in ln}


def test_doctor_imports_no_kernel_package_in_its_own_process_and_still_binds_fla():
    """The speed property: fla's import (torch._dynamo, inductor: seconds) runs in a forked
    child; doctor's process imports torch only. The answer is the in-process one: fla bound, BROKEN on CPU."""
    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    res = run(["doctor", "--model", "qwen3.8-27b", "--json"], fla, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert res.returncode == 4, res.stderr[-3000:]
    rep = json.loads(res.stdout)
    assert function(rep, "chunk_gated_delta_rule")["implementation"].startswith("fla.ops.gated_delta_rule")
    assert rep["environment"]["packages"]["fla"]["imports"] is True
    here = _imported_here(res.stderr)
    assert "torch" in here and "kernelcheck" in here  # the lines are there: the check below can see imports
    assert not here & set(KERNEL_IMPORTS), sorted(here & set(KERNEL_IMPORTS))
    assert "UserWarning" not in res.stderr  # what fla prints while importing stays in the child's file
    exact = run(["doctor", "--model", "qwen3.8-27b", "--json", "--exact"], fla, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert "fla" in _imported_here(exact.stderr)  # --exact imports in-process, as documented
    assert json.loads(exact.stdout)["functions"] == rep["functions"]


def test_fla_with_triton_on_cpu_under_5_14_is_disabled_not_broken():
    tf = site("transformers==5.14.1", deps=True)
    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer"], tf, fla)
    assert code == 3, rep
    f = function(rep, "chunk_gated_delta_rule")
    assert f["status"] == "unsupported"
    assert f["reason"] and f["implementation"].endswith("torch_chunk_gated_delta_rule"), f
    assert not any(x["id"] == "fla-cpu-crash" for x in rep["findings"])


def test_broken_kernel_import_in_old_regime_breaks_the_modeling_module(tmp_path):
    # A causal_conv1d whose import raises the way an ABI-mismatched extension does.
    pkg = tmp_path / "causal_conv1d"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "raise ImportError('/x/causal_conv1d_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')\n")
    dist = tmp_path / "causal_conv1d-1.7.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: causal-conv1d\nVersion: 1.7.0\n")
    tf = site("transformers==5.17.0", deps=True)
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer"], tf, tmp_path)
    f = function(rep, "causal_conv1d_fn")
    assert f["status"] == "fallback"
    assert rep["environment"]["packages"]["causal_conv1d"]["error"] == \
        "ImportError: /x/causal_conv1d_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    assert "--source build" in f["fix"]
    assert any(x["id"] == "abi-mismatch" and x["severity"] == "warning" for x in rep["findings"])


# --- model resolution ------------------------------------------------------------------------------

def test_models_lists_aliases_and_families():
    res = run(["models"])
    assert res.returncode == 0
    assert "qwen3.8-27b" in res.stdout and "Qwen/Qwen3.8-27B" in res.stdout  # wording: renderer test
    for mt in ("qwen3_next", "qwen3_5_moe", "qwen4_exp", "olmo_hybrid", "kimi_linear", "mamba2", "falcon_h1",
               "lfm2"):
        assert mt in res.stdout
    code, data = run_json(["models"])
    assert any(a["alias"] == "qwen3.8-27b" and a["model_type"] == "qwen3_5" for a in data["aliases"])


@pytest.mark.parametrize("model_type,expect", [
    ("kimi_linear", "chunk_kda"), ("mamba2", "mamba_chunk_scan_combined"), ("lfm2", "causal_conv1d_fn"),
    ("qwen3_next", "chunk_gated_delta_rule"), ("falcon_h1", "selective_state_update"),
    ("olmo_hybrid", "fused_recurrent_gated_delta_rule"),
])
def test_other_families_by_model_type(model_type, expect):
    code, rep = run_json(["doctor", "--model", model_type, "--mode", "infer"])
    assert code == 3, rep
    assert rep["model"]["model_type"] == model_type
    f = function(rep, expect)
    assert f["status"] == "fallback" and f["reason"]


def test_local_folder_with_config(tmp_path):
    cfg = {"model_type": "qwen3_next", "hidden_size": 64}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, rep = run_json(["doctor", "--model", str(tmp_path)])
    assert code == 3
    assert rep["model"]["source"] == "local" and rep["model"]["model_type"] == "qwen3_next"


def test_hub_id_resolved_from_hf_cache_offline(tmp_path):
    cache = tmp_path / "hub"
    snap = cache / "models--acme--tiny-hybrid" / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({"model_type": "lfm2"}))
    refs = cache / "models--acme--tiny-hybrid" / "refs"
    refs.mkdir()
    (refs / "main").write_text("0123456789abcdef0123456789abcdef01234567")
    code, rep = run_json(["doctor", "--model", "acme/tiny-hybrid", "--mode", "infer"],
                         env={"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    assert code == 3, rep
    assert rep["model"]["source"] == "hf-cache" and rep["model"]["model_type"] == "lfm2"
    assert function(rep, "causal_conv1d_update")["status"] == "fallback"


# --- bad input: one paragraph, exit 2, no traceback ----------------------------------------------

def _transformers_data() -> dict:
    import tomllib

    return tomllib.loads((REPO / "matrix" / "transformers.toml").read_text())


def _bad(args, *sites, env=None):
    res = run(args, *sites, env=env)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    return res.stderr


def test_unknown_alias_suggests_closest():
    err = _bad(["doctor", "--model", "qwen3.8-72b"])
    assert "Unknown model 'qwen3.8-72b'" in err and "qwen3.8-27b" in err  # wording: renderer test


def test_malformed_config(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "qwen3_5", ')
    err = _bad(["doctor", "--model", str(tmp_path)])
    assert "not valid JSON" in err and "line 1" in err  # wording: renderer test


def test_config_without_model_type(tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    assert "no \"model_type\"" in _bad(["doctor", "--model", str(tmp_path)])


def test_unreadable_config(tmp_path):
    (tmp_path / "config.json").mkdir()  # a folder where the file should be: unreadable as a file
    err = _bad(["doctor", "--model", str(tmp_path)])
    assert "config.json is a folder, not a regular file" in err  # wording: renderer test


def test_unknown_model_type(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "qwen3_55"}')
    err = _bad(["doctor", "--model", str(tmp_path)])
    assert "model_type 'qwen3_55'" in err and "qwen3_5" in err  # wording: renderer test


def test_missing_folder_and_missing_hub_id_offline(tmp_path):
    assert "does not exist" in _bad(["doctor", "--model", str(tmp_path / "nope")])
    err = _bad(["doctor", "--model", "acme/not-cached"], env={"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert "not in the Hugging Face cache" in err  # wording: renderer test


def test_bad_mode_is_usage_error():
    res = run(["doctor", "--model", "qwen3.8-27b", "--mode", "serve"])
    assert res.returncode == 2 and "Invalid value for '--mode'" in res.stderr  # wording: renderer test


def test_json_error_object_on_bad_input():
    res = run(["doctor", "--model", "nope-model", "--json"])
    assert res.returncode == 2
    data = json.loads(res.stdout)
    assert data["schema"] == "kernelcheck.error/1" and data["verdict"] is None
    # the paragraph the terminal shows (its words: test_unknown_alias_suggests_closest)
    assert data["exit_code"] == 2 and _bad(["doctor", "--model", "nope-model"]).strip() == \
        f"kernelcheck doctor: {data['error']}"


def test_no_torch_installed_at_all(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    deps = site("click", "packaging")
    env = {"PYTHONPATH": f"{deps}:{Path(__file__).resolve().parents[2]}", "HF_HUB_OFFLINE": "1"}
    import os
    res = subprocess.run([str(py), "-m", "kernelcheck", "doctor", "--model", "qwen3.8-27b"], capture_output=True,
                         text=True, env={**os.environ, **env})
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "torch is not installed" in res.stderr and "Traceback" not in res.stderr  # wording: renderer test


# --- the fast static reading agrees with transformers' own closures --------------------------------

@pytest.mark.parametrize("sites", [
    (), (("transformers==5.15.1",),), (("transformers==5.17.0",),),
    (("transformers==5.15.1",), ("fla-core==0.6.0", "einops", "triton==3.6.0")),
    ((("fla-core==0.6.0", "einops", "triton==3.6.0")),),
])
def test_static_binding_equals_exact_binding(sites):
    paths = [site(*reqs, deps=reqs[0].startswith("transformers")) for reqs in sites]
    for model in ("qwen3.8-27b", "mamba2"):
        _, fast = run_json(["doctor", "--model", model, "--mode", "infer"], *paths)
        _, exact = run_json(["doctor", "--model", model, "--mode", "infer", "--exact"], *paths)
        def view(r):
            return [(f["name"], f["status"], f["implementation"], f["reason"]) for f in r["functions"]]
        assert view(fast) == view(exact), model


# --- transformers 5.25 and newer model types ----------------------------------------------------------------

# TF525 (tests/envs.py): transformers 5.25.0 with kernels 0.19.1, the release its hard requirement
# (>=0.19.1,<0.20) resolves to, installed with its dependencies.
TF525_KERNELS_OUTSIDE = ("transformers==5.25.0",)  # --no-deps on purpose: the base kernels 0.17.2, outside the window


def test_5_25_hub_kernels_on_by_default_with_kernels_outside_its_window_is_broken():
    tf = site(*TF525_KERNELS_OUTSIDE)
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b"], tf)
    assert rep["environment"]["transformers"] == "5.25.0"
    assert code == 4, rep
    bad = next(x for x in rep["findings"] if x["id"] == "hub-kernels-unusable")
    assert bad["severity"] == "broken"
    assert "USE_HUB_KERNELS=0" in bad["fix"]
    hub = rep["hub"]["transformers"]
    assert hub["use_kernels_default"] is True and "unless USE_HUB_KERNELS disables" in hub["use_kernels_source"]
    assert not any(x["id"] == "transformers-unread" for x in rep["findings"])


def test_5_25_train_mode_counts_the_recurrent_function_of_the_chunked_path_and_reports_kernelize_hooks():
    code, rep = run_json(["doctor", "--model", "qwen3_5", "--mode", "train"], site(*TF525, deps=True),
                         env={"USE_HUB_KERNELS": "0"})
    assert code == 3, rep
    # 5.25's Qwen3_5GatedDeltaNet.forward calls torch_recurrent_gated_delta_rule for the last tokens when the cache
    # keeps intermediate states: not "not used in this mode"; the conv update stays decode-only
    assert function(rep, "fused_recurrent_gated_delta_rule")["used"] is True
    assert function(rep, "causal_conv1d_update")["used"] is False
    ids = {f["id"]: f for f in rep["findings"]}
    assert ids["decode-function-in-prefill"]["functions"] == ["fused_recurrent_gated_delta_rule"]
    assert ids["decode-function-in-prefill"]["severity"] == "info"
    hooks = ids["kernelize-hooks"]["message"]
    assert "causal_conv1d_forward (@use_kernel_forward_from_hub('causal_conv1d_forward')" in hooks
    assert "attached to Qwen3_5GatedDeltaNet by use_kernelized_func" in hooks
    assert "its own body runs and calls causal_conv1d_fn, causal_conv1d_update" in hooks
    assert ids["kernelize-hooks"]["severity"] == "info" and "kernel-decorator-unread" not in ids


def test_the_installed_transformers_has_no_recurrent_call_in_the_chunked_path():
    code, rep = run_json(["doctor", "--model", "qwen3_5", "--mode", "train"])
    assert code == 3, rep
    assert function(rep, "fused_recurrent_gated_delta_rule")["used"] is False  # 5.24: decode only
    assert not any(f["id"] == "decode-function-in-prefill" for f in rep["findings"])


def test_a_kernel_decorator_the_reader_does_not_know_is_a_warning():
    import ast

    from kernelcheck.core import matrix
    from kernelcheck.doctor import source_notes
    from kernelcheck.integrations import transformers_calls

    src = (site(*TF525, deps=True) / "transformers" / "models" / "qwen3_5" / "modeling_qwen3_5.py").read_text()
    src += '\n\n@use_kernel_stepwise_from_hub("chunk_gated_delta_rule")\ndef stepwise(x):\n    return x\n'
    got = source_notes.hook_findings("transformers.models.qwen3_5.modeling_qwen3_5", "5.99.0",
                                     transformers_calls.hooks_of(ast.parse(src)), matrix.load())
    bad = next(f for f in got if f.id == "kernel-decorator-unread")
    assert bad.severity == "warning"
    assert bad.decorators == ("use_kernel_stepwise_from_hub",) and bad.functions == ()
    assert transformers_calls.hooks_of(ast.parse(src)).unread[-1][:2] == ("use_kernel_stepwise_from_hub", "stepwise")


def test_5_25_with_hub_kernels_disabled_is_the_torch_fallback():
    tf = site(*TF525, deps=True)
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b"], tf, env={"USE_HUB_KERNELS": "0"})
    assert code == 3, rep
    assert not any(x["id"] == "hub-kernels-unusable" for x in rep["findings"])
    assert rep["hub"]["transformers"]["use_kernels_default"] is False
    assert any(x["id"] == "dispatch-env" for x in rep["findings"])
    assert rep["environment"]["env"]["USE_HUB_KERNELS"] == "0"  # a dispatch variable: the dispatch-env finding names it


@pytest.mark.parametrize("model_type,needs", [("glm5_next_text", "chunk_kda"), ("inkling_text", "causal_conv1d_fn"),
                                              ("qwen3_5_text", "chunk_gated_delta_rule")])
def test_sub_config_types_get_their_parents_needs(model_type, needs):
    code, rep = run_json(["doctor", "--model", model_type], site(*TF525, deps=True), env={"USE_HUB_KERNELS": "0"})
    assert code == 3, rep
    assert rep["model"]["model_type"] == model_type
    assert function(rep, needs)["status"] == "fallback"


def test_any_model_type_the_installed_transformers_knows_resolves():
    code, rep = run_json(["doctor", "--model", "llama"], site(*TF525, deps=True), env={"USE_HUB_KERNELS": "0"})
    assert code == 0, rep  # llama binds no fast kernel: nothing slow to report
    assert rep["model"]["model_type"] == "llama" and [f["name"] for f in rep["functions"]] == ["attention:sdpa"]


def test_a_listed_type_older_transformers_lacks_says_too_old():
    tf = site("transformers==5.20.2")
    code, rep = run_json(["doctor", "--model", "lara_mini"], tf)
    assert code == 4, rep
    f = next(x for x in rep["findings"] if x["id"] == "transformers-too-old")
    assert f["severity"] == "broken" and rep["model"]["model_type"] == "lara_mini"
    assert not any(x["id"] == "modeling-import-fails" for x in rep["findings"])


def test_inkling_is_not_a_model_type_but_its_real_types_are():
    assert _bad(["doctor", "--model", "inkling"])  # not a transformers model_type
    code, rep = run_json(["doctor", "--model", "inkling_mm_model"], site(*TF525, deps=True),
                         env={"USE_HUB_KERNELS": "0"})
    assert code == 3 and function(rep, "causal_conv1d_fn")["status"] == "fallback"


# --- an unreachable Hub never hangs the gate -----------------------------------------------------------------

def test_hub_that_accepts_and_never_answers_is_bounded(tmp_path):
    import socket
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)  # the kernel accepts connections; nobody ever answers
    try:
        env = {"HF_HUB_OFFLINE": "", "HF_ENDPOINT": f"http://127.0.0.1:{srv.getsockname()[1]}",
               "HF_HUB_CACHE": str(tmp_path)}
        t0 = time.monotonic()
        res = run(["--network-timeout", "1", "doctor", "--model", "Qwen/Qwen2.5-0.5B"], env=env, timeout=60)
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert res.returncode == 2, res.stderr
    assert took < 20, took
    waited = "no answer within 1 s while waiting for config.json of Qwen/Qwen2.5-0.5B"
    assert waited in res.stderr  # wording: renderer test
    assert "HF_HUB_OFFLINE=1" in res.stderr and "Traceback" not in res.stderr  # wording: renderer test


def test_hub_name_that_does_not_resolve_is_bounded_and_quiet(tmp_path):
    import time

    env = {"HF_HUB_OFFLINE": "", "HF_ENDPOINT": "http://kc-no-such-host.invalid", "HF_HUB_CACHE": str(tmp_path)}
    t0 = time.monotonic()
    res = run(["--network-timeout", "2", "doctor", "--model", "Qwen/Qwen2.5-0.5B"], env=env, timeout=60)
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stderr
    assert took < 20, took  # was 25 s of huggingface_hub retries
    assert "Retrying" not in res.stderr and "thrown while requesting" not in res.stderr.split("last error")[0]
    assert "HF_HUB_OFFLINE=1" in res.stderr and "Traceback" not in res.stderr  # wording: renderer test
    assert len(res.stderr.strip().splitlines()) <= 2, res.stderr  # the waiting line and the one-paragraph error


# --- what changes the dispatch at run time (in-process, explicit inputs) ---------------------------------------

def test_dispatch_variables_and_unsloth_are_reported():
    from kernelcheck.core import environment
    from kernelcheck.doctor.run import runtime_findings

    got = runtime_findings({"FLA_TILELANG": "0", "LOCAL_KERNELS": "a/b=/x", "PATH": "/bin"},
                           dist_version=lambda d: "2026.5.1" if d == "unsloth_zoo" else None)
    ids = {f.id: f for f in got}
    assert set(ids) == {"dispatch-env", "unsloth-replaces-fla"}
    # the variables the dispatch-env finding names: the dispatch ones, never PATH
    assert environment.dispatch_variables({"FLA_TILELANG": "0", "LOCAL_KERNELS": "a/b=/x", "PATH": "/bin"}) == \
        {"FLA_TILELANG": "0", "LOCAL_KERNELS": "a/b=/x"}
    assert ids["dispatch-env"].severity == "info" and ids["unsloth-replaces-fla"].severity == "warning"
    assert "kernelcheck verify --model M" in (ids["unsloth-replaces-fla"].fix or "")
    assert "unslothai/unsloth/issues/10487" in (ids["unsloth-replaces-fla"].reference or "")
    assert runtime_findings({"PATH": "/bin"}, dist_version=lambda d: None) == []


def test_5_25_with_fla_bound_on_cpu_names_the_torch_function_that_really_runs():
    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    code, rep = run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "infer"], site(*TF525, deps=True), fla,
                         env={"USE_HUB_KERNELS": "0"})
    f = function(rep, "chunk_gated_delta_rule")
    assert f["status"] == "unsupported", f
    assert f["implementation"].endswith("torch_chunk_gated_delta_rule"), f  # not fla.ops...: the device check
    assert f["reason"]
    assert not any(x["id"] == "fla-cpu-crash" for x in rep["findings"])


def _mamba_ssm_main(root: Path, built: bool) -> Path:
    """A mamba-ssm built from main after mamba#977 without MAMBA_KEEP_CUDA_BUILD: the Python package (the names
    transformers resolves; their bodies raise as selective_scan_interface's _check_selective_scan_cuda does) and, when
    `built`, the top-level extension module selective_scan_cuda. No code of it runs: doctor finds and binds."""
    ops = root / "mamba_ssm" / "ops"
    (ops / "triton").mkdir(parents=True)
    (root / "mamba_ssm" / "__init__.py").write_text('__version__ = "2.3.2.post1"\n')
    (ops / "__init__.py").write_text("")
    (ops / "triton" / "__init__.py").write_text("")
    raises = "(*args, **kwargs):\n    raise RuntimeError('selective_scan_cuda is not installed')\n"
    (ops / "selective_scan_interface.py").write_text(f"def selective_scan_fn{raises}\n\ndef mamba_inner_fn{raises}")
    (ops / "triton" / "selective_state_update.py").write_text(f"def selective_state_update{raises}")
    if built:
        (root / "selective_scan_cuda.py").write_text("")
    return root


def test_mamba_977_mamba1_is_broken_without_selective_scan_cuda_and_mamba2_is_not(tmp_path):
    """mamba-ssm imports and transformers 5.24 binds it, but the probe finds no selective_scan_cuda: Mamba-1 (mamba,
    zamba) raises at its first forward (BROKEN, exit 4); Mamba-2 uses mamba-ssm's Triton functions only."""
    bare = _mamba_ssm_main(tmp_path / "bare", built=False)
    for model in ("mamba", "zamba"):
        code, rep = run_json(["doctor", "--model", model, "--mode", "infer"], bare)
        (hit,) = [f for f in rep["findings"] if f["id"] == "mamba-selective-scan-cuda-missing"]
        assert code == 4 and hit["severity"] == "broken", rep["findings"]
        assert function(rep, "selective_scan_fn")["status"] == "broken"
    code, rep = run_json(["doctor", "--model", "mamba2", "--mode", "infer"], bare)
    assert code == 3 and "mamba-selective-scan-cuda-missing" not in {f["id"] for f in rep["findings"]}
    code, rep = run_json(["doctor", "--model", "mamba", "--mode", "infer"], _mamba_ssm_main(tmp_path / "ok", True))
    assert code == 3 and "mamba-selective-scan-cuda-missing" not in {f["id"] for f in rep["findings"]}
