"""doctor against the ground truth: real tiny models built and run on the CPU, the callable of every slot recorded
(tests/groundtruth.py). A bounded subset here; `python -m tests.groundtruth [--transformers X]` runs every type."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests import groundtruth
from tests.envs import REPO, TF525, site

pytestmark = pytest.mark.integration

MAMBA_513 = ["mamba", "mamba2", "jamba", "zamba"]  # falcon_mamba, nemotron_h, bamba ...: the full command
FLA = ("fla-core==0.6.0", "einops", "triton==3.6.0")
# A bounded subset of each release (the full run: `python -m tests.groundtruth --transformers X`): a Gated DeltaNet
# hybrid, a Mamba, a short-conv model, a model with no fast kernel (llama: 5.13's rotary Hub decorator) and a
# vision tower (qwen3_5_vision: the parent's module, none of its layers).
SUBSET = ["qwen3_5", "mamba2", "lfm2", "llama", "qwen3_5_vision"]
NEWEST = ["qwen3_5", "llama", "mamba2"]  # the newest transformers + kernels, on a CPU and on a CUDA torch build


def _check(rows: list[dict]) -> dict[tuple[str, str], dict]:
    assert all(r["agree"] for r in rows), "\n" + groundtruth.table(rows)
    return {(r["model_type"], r["mode"]): r for r in rows}


def test_installed_transformers_doctor_agrees_with_what_runs():
    rows = _check(groundtruth.run(["qwen3_5", "mamba2", "zamba", "lfm2"], ("train", "infer"), [], {}))
    # the truth is what ran: the torch callables of the decorated functions, on this CPU
    calls = rows[("qwen3_5", "infer")]["truth_calls"]
    assert any(c.startswith("chunk_gated_delta_rule=torch:") and "torch_chunk_gated_delta_rule" in c for c in calls)
    assert any(c.startswith("fused_recurrent_gated_delta_rule=torch:") for c in calls)
    assert not any(c.startswith("fused_recurrent_gated_delta_rule") for c in rows[("qwen3_5", "train")]["truth_calls"])
    assert all(r["truth_exit"] == 3 for r in rows.values())


@pytest.mark.parametrize("version", ["5.18.0", "5.23.0"])
def test_transformers_5_18_and_5_23_doctor_agrees_with_what_runs(version):
    # 5.18: the base's kernels 0.17.2 is inside its window (>=0.17,<0.18); 5.23: outside (>=0.18.2,<0.19)
    rows = _check(groundtruth.run(SUBSET, ("train", "infer"), [site(f"transformers=={version}", deps=True)], {}))
    assert rows[("qwen3_5", "train")]["truth_exit"] == 3 and rows[("mamba2", "infer")]["truth_exit"] == 3
    assert rows[("llama", "train")]["truth_exit"] == 0 and rows[("qwen3_5_vision", "infer")]["truth_exit"] == 0
    assert rows[("qwen3_5_vision", "train")]["doctor"] == {"attention:sdpa": "fast"}


def test_transformers_5_23_lfm3_runs_its_own_torch_conv_and_doctor_says_so():
    """5.23's lfm3 defines its own torch causal_conv1d_fn/update ("the hub causal_conv1d kernels serve widths 2-4,
    LFM3 uses 7"): no kernel path exists, so the job is as fast as it gets (truth 0, doctor 0), and doctor's reason
    says the module calls its own torch function (it said "does not call")."""
    tf = site("transformers==5.23.0", deps=True)
    rows = _check(groundtruth.run(["lfm3"], ("train", "infer"), [tf], {}))
    assert rows[("lfm3", "train")]["truth_exit"] == 0 and rows[("lfm3", "infer")]["doctor_exit"] == 0
    rep = groundtruth.doctor("lfm3", "train", [tf], {})["report"]
    conv = next(f for f in rep["functions"] if f["name"] == "causal_conv1d_fn")
    assert conv["status"] == "unsupported" and conv["used"] is False
    assert conv["implementation"] == "transformers.models.lfm3.modeling_lfm3.causal_conv1d_fn"


def test_transformers_5_23_newest_hybrids_build_tiny_and_doctor_agrees():
    """qwen4_exp (QSA indexer fields), inkling (mlp_layer_types per layer) and bailing_hybrid (MLA heads, grouped
    MoE) could not be built at the tiny shape, so the truth was a crash (4) or missing; matrix/verify.toml and the
    per-layer list cut in verify/layers.py build them, and doctor's FALLBACK on this CPU matches what runs."""
    tf = site("transformers==5.23.0", deps=True)
    rows = _check(groundtruth.run(["qwen4_exp", "inkling_mm_model", "bailing_hybrid", "glm5_next_text"],
                                  ("train", "infer"), [tf], {}))
    assert {r["truth_exit"] for r in rows.values()} == {3}
    # glm5_next's text part is no causal LM: its base model runs as a text tower (forward + backward, prefill +
    # decode), and what ran is transformers' own torch KDA (the truth behind doctor's FALLBACK for chunk_kda)
    assert "chunk_kda=torch:transformers.models.glm5_next.modeling_glm5_next.chunk_kimi_delta_attention" \
        in rows[("glm5_next_text", "train")]["truth_calls"]
    assert any(c.startswith("fused_recurrent_kda=torch:") for c in rows[("glm5_next_text", "infer")]["truth_calls"])


def test_transformers_5_13_mamba_family_doctor_agrees_with_what_runs():
    tf = site("transformers==5.13.1", deps=True)
    rows = _check(groundtruth.run([*MAMBA_513, "llama", "qwen3_5_vision"], ("train",), [tf], {}))
    assert rows[("llama", "train")]["truth_exit"] == 0 and rows[("qwen3_5_vision", "train")]["truth_exit"] == 0
    # 5.13 resolves the kernels in the mixer's __init__: with none here the mixer's own torch path runs ...
    assert rows[("mamba2", "train")]["truth_calls"] == [
        "Mamba2Mixer.torch_forward=torch:transformers.models.mamba2.modeling_mamba2.Mamba2Mixer.torch_forward"]
    assert rows[("mamba", "train")]["truth_exit"] == 3 and rows[("jamba", "train")]["truth_exit"] == 3
    # ... and zamba's forward raises instead (use_mamba_kernels defaults to True)
    assert rows[("zamba", "train")]["truth_exit"] == 4
    truth_error = rows[("zamba", "train")]["truth_error"]
    assert "Fast Mamba kernels are not available" in truth_error  # wording: transformers' own message


def test_transformers_5_13_with_kernels_in_window_offline_crashes_at_build_and_doctor_says_broken(tmp_path):
    # kernels 0.15.2 is inside 5.13's window: lazy_load_kernel fetches Hub kernels in __init__; offline with an empty
    # cache that raises. The one command a user runs for a release, with its JSON rows.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run(
        [sys.executable, "-m", "tests.groundtruth", "--transformers", "5.13.1", "--with", "kernels==0.15.2",
         "--env", f"HF_HOME={tmp_path}", "--env", "HF_HUB_OFFLINE=1", "--env", "USE_HUB_KERNELS=0",
         "--types", "mamba2,falcon_mamba", "--modes", "train", "--json"],
        capture_output=True, text=True, cwd=str(REPO), env=env, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {r["model_type"]: r for r in json.loads(res.stdout)}
    for t in ("mamba2", "falcon_mamba"):
        assert rows[t]["truth_exit"] == 4 and rows[t]["doctor_exit"] == 4 and rows[t]["agree"]
        # USE_HUB_KERNELS=0 does not help
        assert "not available in the local cache" in rows[t]["truth_error"]  # wording: kernels' own message


def test_5_25_with_its_kernels_hub_kernels_by_default_load_on_cpu_and_doctor_agrees():
    # transformers 5.25.0 with kernels 0.19.1 installed the normal way (its hard requirement), Hub kernels on by
    # default, offline: on this CPU from_pretrained loads (the mapping has no CPU kernel) and the torch path runs
    rows = _check(groundtruth.run(NEWEST, ("train",), [site(*TF525, deps=True)], {}))
    assert rows[("qwen3_5", "train")]["truth_exit"] == 3 and rows[("llama", "train")]["truth_exit"] == 0
    assert rows[("mamba2", "train")]["truth_exit"] == 3
    assert any(c.startswith("chunk_gated_delta_rule=torch:") for c in rows[("qwen3_5", "train")]["truth_calls"])


def test_5_25_hub_kernels_by_default_the_load_raises_and_doctor_says_broken():
    # kernels 0.17.2 (the dev env's) is outside 5.25's window: from_pretrained turns use_kernels on by default and
    # raises; building from a config alone would not, so the harness loads the saved tiny model like a job does.
    # transformers installed --no-deps on purpose: pip would otherwise bring the kernels 0.19.1 it requires.
    rows = _check(groundtruth.run(["qwen3_5"], ("train",), [site("transformers==5.25.0")], {}))
    for r in rows.values():
        assert r["truth_exit"] == 4 and r["doctor_exit"] == 4
        assert r["truth_error"].startswith("building the model raised: from_pretrained: ValueError: Kernels are not "
                                           "available"), r["truth_error"]


def test_5_25_fla_bound_on_cpu_and_drafts_with_a_recording_cache_doctor_agrees_with_what_runs():
    rows = _check(groundtruth.run(["qwen3_5", "mamba2"], ("infer", "recording"),
                                  [site(*TF525, deps=True), site(*FLA)], {"USE_HUB_KERNELS": "0"}))
    # fla is bound, but 5.25's wrapper checks the input's device on every call: on this CPU the torch function
    # runs, and doctor names it (status unsupported: fla would run on a GPU)
    infer = rows[("qwen3_5", "infer")]
    assert any(c.startswith("chunk_gated_delta_rule=torch:") and c.endswith("torch_chunk_gated_delta_rule")
               for c in infer["truth_calls"]), infer["truth_calls"]
    assert infer["doctor"]["chunk_gated_delta_rule"] == "unsupported"
    # the cached decode passes the cache as `cache` (5.25's name): the recurrent function ran in decode
    assert any(c.startswith("fused_recurrent_gated_delta_rule=torch:") for c in infer["truth_calls"])
    # a forward of drafted tokens with a cache that keeps their states calls the recurrent ("decode") function
    # in the chunked path: doctor's train mode counts it as used
    for model_type, fn in (("qwen3_5", "fused_recurrent_gated_delta_rule"), ("mamba2", "selective_state_update")):
        rec = rows[(model_type, "recording")]
        assert any(c.startswith(f"{fn}=torch:") for c in rec["truth_calls"]), rec["truth_calls"]
        assert rec["doctor"][fn] in ("unsupported", "fallback"), rec["doctor"]  # no "(unused)"


def test_harness_reports_a_disagreement_and_exits_1():
    # doctor says READY for mamba2 on 5.13 when the lazy-kernel regime is not read; the harness must say so. The
    # same comparison, fed doctor's old answer (exit 0, every function "not called"), disagrees.
    obs = {"model_type": "mamba2", "modes": {"train": {"exit": 3, "error": None, "calls": [
        {"step": "train", "slot": "Mamba2Mixer.torch_forward", "callable": "x.torch_forward", "fast": False}]}}}
    old = {"exit": 0, "report": {"functions": [{"name": "causal_conv1d_fn", "status": "unsupported", "used": False}]}}
    row = groundtruth.compare(obs, old, "train")
    assert not row["agree"] and row["problems"] == ["exit: truth 3, doctor 0"]
    assert "DISAGREE: exit: truth 3, doctor 0" in groundtruth.table([row])
    # per function: a function that ran is "not used in this mode" for doctor (its pre-5.25 train-mode answer
    # for the recurrent function that drafted tokens call)
    obs = {"model_type": "qwen3_5", "modes": {"recording": {"exit": 3, "error": None, "calls": [
        {"step": "drafts", "slot": "fused_recurrent_gated_delta_rule", "callable": "x.torch_recurrent",
         "fast": False}]}}}
    old = {"exit": 3, "report": {"functions": [
        {"name": "fused_recurrent_gated_delta_rule", "status": "fallback", "used": False}]}}
    row = groundtruth.compare(obs, old, "recording")
    assert row["problems"] == ["fused_recurrent_gated_delta_rule ran, doctor says it is not used in this mode"]


def test_5_25_on_a_cuda_torch_build_without_a_gpu_doctor_for_the_cpu_agrees_and_the_default_predicts_cuda():
    """What `pip install torch` gives on a login node or in a docker build stage (a CUDA build, no GPU), with the
    newest transformers + kernels, offline: the job's load works here and the torch path runs (truth 3 for the
    hybrids, 0 for llama), and `doctor --device cpu` (the harness's doctor) agrees. The harness runs on that
    interpreter, which has no pytest. doctor's default there is a prediction for a CUDA machine: its device says
    so, and its hub-not-listable is worded as one."""
    from tests.kcfixtures import cuda_torch_venv

    py = cuda_torch_venv() / "bin" / "python"
    tf = site(*TF525, deps=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERNELCHECK_DEBUG")}
    res = subprocess.run([str(py), "-m", "tests.groundtruth", "--site", str(tf), "--types", ",".join(NEWEST),
                          "--modes", "train", "--json"], capture_output=True, text=True, cwd=str(REPO),
                         env={**env, "HF_HUB_OFFLINE": "1"}, timeout=1500)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    rows = _check(json.loads(res.stdout))
    assert rows[("qwen3_5", "train")]["truth_exit"] == 3 and rows[("mamba2", "train")]["truth_exit"] == 3
    assert rows[("llama", "train")]["truth_exit"] == 0
    default = subprocess.run([str(py), "-m", "kernelcheck", "doctor", "--model", "llama", "--json"],
                             capture_output=True, text=True, cwd=str(REPO), timeout=600,
                             env={**env, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{tf}{os.pathsep}{REPO}"})
    rep = json.loads(default.stdout)
    assert rep["device"] == {"type": "cuda", "origin": "torch-build", "visible": False}
    assert default.returncode == 4 and "hub-not-listable" in [f["id"] for f in rep["findings"]]
