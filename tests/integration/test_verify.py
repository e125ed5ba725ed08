"""`kernelcheck verify` and `doctor --live` on the CPU, for real: the real tiny Qwen3.5 model built from
the shipped Qwen3.8-27B config, real transformers 5.24, real torch profiler, run as a subprocess.

Where a fast kernel package must be bound, a stand-in causal-conv1d (tests/standin.py) plays the CUDA
extension that cannot run here; everything else is real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelcheck.report.live_details import benchmark
from tests.envs import function, run, run_json
from tests.standin import causal_conv1d_site
from tests.unit.test_report_readback import rendered

MODEL = "qwen3.8-27b"
GDN = ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "causal_conv1d_fn", "causal_conv1d_update")


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("standins")
    return {b: causal_conv1d_site(root, b) for b in ("ok", "wrong", "backward-raises", "wrong-grads", "nan")}


@pytest.fixture(scope="module")
def cpu_train() -> tuple[int, dict]:
    return run_json(["verify", "--model", MODEL])


def test_cpu_verify_exits_3_with_torch_evidence_for_every_function(cpu_train: tuple[int, dict]) -> None:
    code, rep = cpu_train
    assert code == 3 and rep["exit_code"] == 3 and rep["verdict"] == "fallback"
    assert rep["command"] == "verify" and rep["mode"] == "train"
    for name in GDN:
        f = function(rep, name)
        ev = f["evidence"]
        assert ev["device"] == "cpu"
        assert ev["path"] == "torch"
        # the callable that really ran is transformers' torch reference, named by its real module
        assert ev["implementation_called"].startswith("transformers.models.qwen3_5.modeling_qwen3_5.")
        assert ev["calls"] >= 1 and ev["cpu_ops"] > 0
        assert ev["gpu_kernels"] == 0 and ev["kernel_names"] == []
        assert f["status"] in ("fallback", "unsupported")
        assert f["reason"].startswith("observed: the torch reference ran")
    chunk = function(rep, "chunk_gated_delta_rule")["evidence"]
    # train mode ran the chunk rule's backward under the profiler, attributed to its own range
    assert chunk["backward_cpu_ops"] > 0
    assert {p["pass"] for p in chunk["per_layer"]} == {"forward", "backward"}
    assert all(p["layer"] == 0 for p in chunk["per_layer"])  # layer 0 is the GDN layer of the tiny model
    assert chunk["calls_by_step"] == {"train": 1, "prefill": 1}
    dec = function(rep, "fused_recurrent_gated_delta_rule")
    assert dec["evidence"]["calls_by_step"] == {"decode": 1} and dec["used"] is False
    live = rep["live"]
    assert live["ran"] and live["device"] == "cpu" and live["dtype"] == "float32"
    assert live["model"]["layers"] == ["linear_attention", "full_attention"]
    assert live["model"]["class"] == "Qwen3_5ForCausalLM"
    assert set(live["steps"]) == {"train", "prefill", "decode"}
    assert all(s["kernels"] == 0 and s["cpu_ops"] > 0 for s in live["steps"].values())
    assert live["steps"]["train"]["launch_bound"] is False
    assert "no GPU here" in live["steps"]["train"]["launch_bound_sentence"]
    assert live["steps"]["train"]["top_ops_by_count"]  # the shared trace analysis ran on verify's trace
    assert "torch reference" in live["reference_comparison"]["skipped"]
    assert any(f["id"] == "verify-cpu" for f in rep["findings"])
    t = live["timing"]
    assert t["total_s"] >= t["excluding_import_s"] > 0


def test_cpu_verify_text_names_the_path_and_exit_code(tmp_path: Path) -> None:
    res = run(["verify", "--model", MODEL, "--mode", "infer", "--tokens", "32", "-o", str(tmp_path / "r.json")],
              env={"COLUMNS": "100"})  # piped, as a person's pipe is (the width rendered() wraps to)
    assert res.returncode == 3, res.stderr[-2000:]
    rep = json.loads((tmp_path / "r.json").read_text())  # the same run's values
    called = "transformers.models.qwen3_5.modeling_qwen3_5.torch_chunk_gated_delta_rule"
    evidence = function(rep, "chunk_gated_delta_rule")["evidence"]
    assert (evidence["implementation_called"], evidence["path"]) == (called, "torch")
    assert rep["live"]["tokens"] == 32 and rep["exit_code"] == 3 and rep["verdict"] == "fallback"
    # info: named on the notes line, in full with --verbose
    assert "advice-fla" in {f["id"] for f in rep["findings"]}
    # the text is the renderers' from those values (their words: tests/unit/test_report_readback.py's samples)
    out = res.stdout
    assert out == rendered(rep)
    # progress for people goes to stderr, not into the report
    assert "kernelcheck verify: building the tiny qwen3_5 model" in res.stderr  # wording: renderer test
    # third-party noise stays out of the terminal: transformers' "falling back ... install
    # `flash-linear-attention`" lines and the profiler's USDT lines are counted, the advice reconciled
    assert "falling back" not in res.stderr and "[transformers]" not in res.stderr, res.stderr
    assert "USDT" not in res.stderr
    # --verbose shows it
    loud = run(["verify", "--model", MODEL, "--mode", "infer", "--tokens", "32", "--verbose"])
    assert loud.returncode == 3 and "falling back" in loud.stderr  # wording: transformers' own message


def test_infer_mode_runs_prefill_and_decode_only() -> None:
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer", "--tokens", "64"])
    assert code == 3
    assert set(rep["live"]["steps"]) == {"prefill", "decode"}
    assert function(rep, "fused_recurrent_gated_delta_rule")["used"] is True
    assert function(rep, "causal_conv1d_update")["evidence"]["calls_by_step"] == {"decode": 1}
    assert function(rep, "chunk_gated_delta_rule")["evidence"]["backward_cpu_ops"] == 0


def test_benchmark_on_cpu_says_both_paths_are_torch() -> None:
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer", "--benchmark", "--tokens", "64"])
    assert code == 3
    bm = rep["live"]["benchmark"]
    assert bm["layer"] == "Qwen3_5GatedDeltaNet" and bm["pass"] == "forward" and bm["tokens"] == 64
    assert bm["fast"]["ms"] > 0 and bm["reference"]["ms"] > 0
    assert set(bm["reference"]["forced_torch"]) == set(GDN)
    assert bm["fast"]["kernels"] == 0 and "kernel_ratio" not in bm
    assert rep["live"]["device"] == "cpu" and bm["reference"]["kernels"] == 0  # no GPU: both paths are torch
    # (the live line saying both paths are the torch reference is worded in tests/unit/test_live_text.py)
    # the ratio's controls, on the bound path in this process: timed again, and with half its time slept in a
    # forward hook on the layer; the speedup is claimed only when they decide it
    c = bm["controls"]
    assert c["baseline_ms"] == bm["fast"]["ms"] and c["repeats"] == 3 and c["injected_fraction"] == 0.5
    assert c["slowed_ms"] > c["repeat_ms"] and c["measured_slowdown"] > 0
    assert c["ratio"] == pytest.approx(bm["reference"]["ms"] / bm["fast"]["ms"], abs=0.01)
    assert c["decided"] is ("speedup" in bm)
    ids = {(f["id"], f["severity"]) for f in rep["findings"]}
    if not c["detected"]:
        assert ("benchmark-control-cannot-decide", "fallback") in ids
    elif not c["decided"]:
        assert ("benchmark-control-cannot-decide", "info") in ids
    # the keys verify/bench.py always wrote, in order: the typed benchmark (report/live_details.py) writes them back
    assert list(bm) == ["layer", "tokens", "passes", "pass", "fast", "reference",
                        *(["speedup"] if c["decided"] else []), "cpu_op_ratio", "controls"]
    assert list(bm["fast"]) == ["ms", "iters", "kernels", "cpu_ops", "gpu_busy_fraction", "launch_bound",
                                "forced_torch"]
    assert json.dumps(benchmark(bm).to_json()) == json.dumps(bm) and "benchmark_s" in rep["live"]["timing"]


def test_a_benchmark_whose_injected_slowdown_is_too_small_to_see_cannot_decide() -> None:
    """KERNELCHECK_CONTROL_SLOWDOWN=1: a 1 % delay is inside the 2 % noise floor, so the positive control is missed
    and no speedup is claimed, whatever the ratio: `benchmark-control-cannot-decide` (fallback, exit 3)."""
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer", "--benchmark", "--tokens", "64"],
                         env={"KERNELCHECK_CONTROL_SLOWDOWN": "1"})
    assert code == 3
    bm = rep["live"]["benchmark"]
    assert bm["controls"]["injected_fraction"] == 0.01 and bm["controls"]["detected"] is False
    assert "speedup" not in bm and bm["controls"]["decided"] is False
    found = [f for f in rep["findings"] if f["id"] == "benchmark-control-cannot-decide"]
    assert [f["severity"] for f in found] == ["fallback"]


def test_fast_package_bound_is_reported_fast_with_its_implementation(standins: dict[str, Path]) -> None:
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer"], standins["ok"])
    assert code == 3  # fla is still missing
    for name in ("causal_conv1d_fn", "causal_conv1d_update"):
        f = function(rep, name)
        assert f["status"] == "fast", f
        assert f["evidence"]["path"] == "fast"
        assert f["evidence"]["implementation_called"] == f"causal_conv1d.{name}"
        vs = f["evidence"]["vs_reference"]
        assert vs["compared"] and vs["ok"] and vs["rel_err"] <= vs["tolerance"]
    assert function(rep, "chunk_gated_delta_rule")["status"] != "fast"
    mc = rep["live"]["reference_comparison"]
    assert mc["ok"] is True and mc["prefill"]["logits"]["rel_err"] == 0.0


def test_wrong_results_are_broken_exit_4(standins: dict[str, Path]) -> None:
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer"], standins["wrong"])
    assert code == 4 and rep["verdict"] == "broken"
    f = function(rep, "causal_conv1d_fn")
    assert f["status"] == "broken"
    assert f["evidence"]["vs_reference"]["ok"] is False
    assert any(fd["id"] == "verify-mismatch" and "causal_conv1d_fn" in fd["functions"] for fd in rep["findings"])


def test_backward_refusal_is_broken_forward_still_fast(standins: dict[str, Path]) -> None:
    """The fla#640 shape of failure: forward fine, RuntimeError at the first backward."""
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "train", "--benchmark", "--tokens", "64"],
                         standins["backward-raises"])
    assert code == 4
    f = function(rep, "causal_conv1d_fn")
    assert f["status"] == "broken"
    err = f["evidence"]["error"]
    assert err["phase"] == "backward" and err["step"] == "train"
    # what the stand-in raised, whole
    assert err["exception"] == \
        "RuntimeError: standin causal_conv1d: backward refused on this configuration (like fla#640)"
    assert err["implementation"] == "causal_conv1d.causal_conv1d_fn"
    assert f["evidence"]["path"] == "fast"
    assert "train-forward" in f["evidence"]["calls_by_step"]
    assert f["fix"] and "pip uninstall causal-conv1d" in f["fix"]
    # the run went on with that function forced to torch, so the others were still checked
    assert rep["live"]["forced_torch_after_failure"] == ["causal_conv1d_fn"]
    assert function(rep, "chunk_gated_delta_rule")["evidence"]["backward_cpu_ops"] > 0
    # benchmark: the forward pass still times the bound conv; forward+backward must keep it on torch
    passes = rep["live"]["benchmark"]["passes"]
    assert passes["forward"]["fast"]["forced_torch"] == [] and "note" not in passes["forward"]
    assert passes["forward+backward"]["fast"]["forced_torch"] == ["causal_conv1d_fn"]
    assert passes["forward+backward"]["note"]
    assert passes["forward+backward"]["fast"]["ms"] > 0 and passes["forward+backward"]["controls"]["ratio"] > 0


def test_silently_wrong_gradients_are_found_and_named(standins: dict[str, Path]) -> None:
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "train"], standins["wrong-grads"])
    assert code == 4
    mc = rep["live"]["reference_comparison"]
    assert mc["train"]["logits"]["ok"] is True and mc["train"]["grads"]["ok"] is False
    f = function(rep, "causal_conv1d_fn")
    alone = f["evidence"]["alone_on_fast_path_vs_reference"]  # with only causal_conv1d_fn on its bound path
    assert f["status"] == "broken" and alone["ok"] is False and alone["train"]["grads"]["ok"] is False
    assert function(rep, "causal_conv1d_update")["status"] == "fast"


def test_nan_is_blamed_on_the_function_that_made_it(standins: dict[str, Path]) -> None:
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer"], standins["nan"])
    assert code == 4
    assert function(rep, "causal_conv1d_fn")["status"] == "broken"
    assert function(rep, "causal_conv1d_fn")["evidence"]["vs_reference"]["nonfinite"] is True
    # the GDN rule downstream got NaN inputs: not its fault
    assert function(rep, "chunk_gated_delta_rule")["status"] in ("fallback", "unsupported")


def test_doctor_live_merges_evidence() -> None:
    code, rep = run_json(["doctor", "--model", MODEL, "--mode", "infer", "--live"])
    assert code == 3 and rep["command"] == "doctor"
    ev = function(rep, "chunk_gated_delta_rule")["evidence"]
    assert ev["path"] == "torch" and ev["cpu_ops"] > 0
    assert rep["live"]["ran"] is True and rep["live"]["shape"] == "tiny"
    static = run_json(["doctor", "--model", MODEL, "--mode", "infer"])[1]
    assert "evidence" not in function(static, "chunk_gated_delta_rule") and "live" not in static


@pytest.mark.parametrize("args, words", [
    (["verify", "--model", "no-such-model-xyz"], "Unknown model"),
    (["verify", "--model", MODEL, "--shape", "full"], "needs a CUDA GPU"),
    (["verify", "--model", MODEL, "--tokens", "0"], "--tokens must be a positive"),
    (["verify", "--model", MODEL, "--shape", "huge"], "Invalid value for '--shape'"),
    (["verify"], "Missing option '--model'"),
])
def test_bad_input_exits_2_without_traceback(args: list[str], words: str) -> None:
    res = run(args)
    assert res.returncode == 2, (res.stdout[-1000:], res.stderr[-2000:])
    assert words in res.stderr
    assert "Traceback" not in res.stderr


def test_bad_input_json_is_one_object() -> None:
    code, rep = run_json(["verify", "--model", MODEL, "--shape", "full"])
    assert code == 2 and rep["exit_code"] == 2 and rep["command"] == "verify"
    # the paragraph the terminal shows (its words: test_bad_input_exits_2_without_traceback above)
    assert run(["verify", "--model", MODEL, "--shape", "full"]).stderr.strip() == f"kernelcheck verify: {rep['error']}"


def test_help_teaches() -> None:
    res = run(["verify", "--help"])
    assert res.returncode == 0
    assert "kernelcheck verify --model qwen3.8-27b --shape full --benchmark" in res.stdout  # wording: the help text
    assert "--junit" in res.stdout  # wording: the help text


def test_local_folder_model(tmp_path: Path) -> None:
    """A user's own folder with a qwen3_next config: same machinery, another family member."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_next", "num_hidden_layers": 4}))
    code, rep = run_json(["verify", "--model", str(tmp_path), "--mode", "infer", "--tokens", "32"])
    assert code == 3, rep
    assert rep["live"]["model"]["class"] == "Qwen3NextForCausalLM"
    assert function(rep, "chunk_gated_delta_rule")["evidence"]["calls"] >= 1


@pytest.mark.slow
def test_real_fla_on_cpu_is_broken_at_call_time_and_run_goes_on() -> None:
    """Real fla-core 0.6.0 + triton 3.6.0 on a machine without a GPU: imports fine, transformers 5.24 binds it,
    the first call crashes in Triton. Static checks can only guess this; verify sees the exception."""
    from tests.envs import site

    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer", "--tokens", "64"], fla)
    assert code == 4, rep.get("error")
    for name in ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"):
        f = function(rep, name)
        assert f["status"] == "broken"
        err = f["evidence"]["error"]
        assert err["phase"] == "forward" and err["implementation"].startswith("fla.ops.gated_delta_rule.")
        assert "active drivers" in err["exception"]  # wording: Triton's own message (no GPU)
        assert f["fix"].startswith("pip uninstall -y fla-core")
        # the known breakage that names the function (its reason says "[known breakage fla-cpu-crash]")
        assert any(x["id"] == "fla-cpu-crash" and x["severity"] == "broken" and name in x["functions"]
                   for x in rep["findings"])
    # after forcing fla's functions to torch the conv functions were still run and reported
    assert function(rep, "causal_conv1d_fn")["evidence"]["calls"] >= 1
    assert sorted(rep["live"]["forced_torch_after_failure"]) == ["chunk_gated_delta_rule",
                                                                 "fused_recurrent_gated_delta_rule"]


@pytest.mark.slow
def test_module_globals_regime_transformers_5_14() -> None:
    """transformers <= 5.14 stores the functions on each layer (or None: inline conv); verify reads those."""
    from tests.envs import site

    old = site("transformers==5.14.1", "tokenizers==0.22.2", "huggingface_hub>=1.5,<2", "httpx", "httpcore",
               "h11", "anyio", "sniffio")
    code, rep = run_json(["verify", "--model", MODEL, "--mode", "infer", "--tokens", "32"], old)
    assert code == 3, rep.get("error")
    assert rep["environment"]["transformers"] == "5.14.1"
    # the decode function lives on the layer as `recurrent_gated_delta_rule`
    dec = function(rep, "fused_recurrent_gated_delta_rule")["evidence"]
    assert dec["calls_by_step"] == {"decode": 1} and dec["implementation_called"].endswith(
        "torch_recurrent_gated_delta_rule")
    conv = function(rep, "causal_conv1d_fn")["evidence"]
    assert conv["path"] == "torch" and "inline torch code in Qwen3_5GatedDeltaNet.forward" in conv[
        "implementation_called"]


@pytest.mark.parametrize("model_type, prefill_fn",
                         [("mamba2", "mamba_chunk_scan_combined"), ("kimi_linear", "chunk_kda")])
def test_other_families_shrink_from_the_same_field_table(model_type: str, prefill_fn: str) -> None:
    code, rep = run_json(["verify", "--model", model_type, "--mode", "infer", "--tokens", "16"])
    assert code == 3, rep.get("error")
    assert rep["live"]["model"]["parameters"] < 1_000_000  # tiny, from a real-size default config
    ev = function(rep, prefill_fn)["evidence"]
    assert ev["path"] == "torch" and ev["calls"] >= 1 and ev["cpu_ops"] > 0
    assert ev["implementation_called"].startswith(f"transformers.models.{model_type}.")
    assert not any(f["id"] == "verify-incomplete" for f in rep["findings"])


def test_full_shape_is_the_real_27b_layer_shape() -> None:
    """--shape full needs a GPU; its config is checked here: real layer sizes, one layer of each type."""
    from kernelcheck.core import matrix, models
    from kernelcheck.verify import layers

    cfg, overrides = layers.shaped_config(models.resolve(MODEL, m=matrix.load()), "full", m=matrix.load())
    assert type(cfg).__name__ == "Qwen3_5TextConfig"
    assert (cfg.hidden_size, cfg.linear_num_key_heads, cfg.linear_num_value_heads) == (5120, 16, 48)
    assert (cfg.linear_key_head_dim, cfg.linear_value_head_dim, cfg.linear_conv_kernel_dim) == (128, 128, 4)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (24, 4, 256)
    assert cfg.layer_types == ["linear_attention", "full_attention"] and cfg.num_hidden_layers == 2
    assert cfg.vocab_size == 1024 and set(overrides) == {"vocab_size", "layer_types", "num_hidden_layers"}
    tiny, _ = layers.shaped_config(models.resolve(MODEL, m=matrix.load()), "tiny", m=matrix.load())
    assert (tiny.hidden_size, tiny.linear_num_value_heads, tiny.vocab_size) == (64, 4, 128)
