"""The Hub prediction is the whole load (the decisions, in process): what `from_pretrained` + `kernelize` meet for a
model, read from the installed transformers' source (activations reached through ACT2FN, a tower's own classes),
the phases the load kernelizes in (INFERENCE at load, TRAINING at model.train()), one story when the load fails,
and which load (device_map vs a CPU load then .to()) the answer is for."""

from __future__ import annotations

import pytest

from kernelcheck.core.status import Finding, FunctionStatus, Severity, Status
from kernelcheck.hub import check as hub_check
from kernelcheck.hub import load as hub_load
from kernelcheck.integrations.transformers_hub import HubRepo, MappingEntry, TransformersHub
from kernelcheck.integrations.transformers_load import LoadName, load_names, load_phases
from kernelcheck.report.hub import HubRow


def _names(model_type: str, module: str) -> dict[str, str]:
    got = load_names(model_type, module)
    assert got is not None, f"the source of {model_type} could not be followed"
    return {n.name: n.kind for n in got}


def test_gpt2_and_llama_reach_the_activation_modules_through_act2fn() -> None:
    gpt2 = load_names("gpt2", "gpt2")
    assert gpt2 is not None
    act = next(n for n in gpt2 if n.name == "NewGELU")  # activations.py, not modeling_gpt2.py, carries it
    assert act.kind == "layer" and "activation_function='gelu_new'" in act.where
    assert "activations.NewGELUActivation" in act.where
    llama = _names("llama", "llama")
    assert llama["SiLU"] == "layer" and {"RMSNorm", "rotary_pos_emb"} <= set(llama)


@pytest.mark.parametrize(("tower", "module", "expected"), [
    ("qwen3_5_vision", "qwen3_5", {"GeluTanh"}),
    ("qwen3_5_moe_vision", "qwen3_5_moe", {"GeluTanh"}),
    ("qwen4_exp_vision", "qwen4_exp", {"GeluTanh"}),
    ("glm5_next_vision", "glm5_next", {"SiLU", "RMSNorm"}),
])
def test_a_vision_tower_lists_its_own_layers_and_no_text_layer(tower: str, module: str, expected: set[str]) -> None:
    got = _names(tower, module)
    assert set(got) == expected, got
    assert "RMSNormGated" not in got and "chunk_gated_delta_rule" not in got


def test_the_text_model_of_a_gdn_model_keeps_its_gated_norm_and_reads_the_text_activation() -> None:
    got = load_names("qwen3_5", "qwen3_5")
    assert got is not None
    names = {n.name for n in got}
    assert {"RMSNormGated", "chunk_gated_delta_rule", "SiLU"} <= names
    assert "GeluTanh" not in names  # the vision config's activation: AutoModelForCausalLM builds the text model only


def test_the_load_kernelizes_for_inference_and_a_train_job_again_for_training() -> None:
    assert load_phases("infer", True) == (("load", "infer"),)
    assert load_phases("train", True) == (("load", "infer"), ("train", "train"))
    assert load_phases("train", False) == (("load", "train"),)  # a transformers that kernelizes in the job's mode


ACT = MappingEntry("SiLU", "cuda", ("INFERENCE",), HubRepo("kernels-community/activation", "Silu", version=1))
ROPE_T = MappingEntry("rotary_pos_emb", "cuda", ("TRAINING",), HubRepo("kernels-community/rotary", "r", version=2))
ROPE_I = MappingEntry("rotary_pos_emb", "cuda", ("INFERENCE",), HubRepo("kernels-community/rotary", "r", version=2))
TH = TransformersHub("5.25.0", "0.19.1", ("0.19.1", "0.20.0"), "import_utils", True, "YES", False, True, True,
                     "modeling_utils.py", True, (ACT, ROPE_T, ROPE_I), "hub_kernels.py", None, ())
NAMES = {"SiLU": LoadName("SiLU", "layer", "x"), "rotary_pos_emb": LoadName("rotary_pos_emb", "layer", "y")}


def test_a_train_job_resolves_the_inference_only_activation_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.environments import make_env

    resolved: list[str] = []

    def fake_resolve(repo_id: str, **kw: object) -> object:
        from kernelcheck.integrations.kernels_hub import Resolution

        resolved.append(repo_id)
        return Resolution(repo_id, kw.get("version"), None, "none", None, None, None, (), None,  # type: ignore[arg-type]
                          error="not in the cache")

    monkeypatch.setattr(hub_check.kernels_hub, "resolve_repo", fake_resolve)
    rows, res = hub_check._rows(TH, NAMES, make_env("9.0"), "cuda", "train", "cache", None)
    act = [r for r in rows if r.name == "SiLU"]
    # at load (INFERENCE) the activation resolves; at model.train() (TRAINING) it has no entry and keeps torch
    assert [(r.phase, r.repo) for r in act] == [("load", "kernels-community/activation@v1"), ("train", None)]
    rope = [r for r in rows if r.name == "rotary_pos_emb"]
    assert [(r.phase, r.repo) for r in rope] == [("load", "kernels-community/rotary@v2")]  # the same repo: one row
    assert set(res) == {"kernels-community/activation@v1", "kernels-community/rotary@v2"}


def test_when_the_load_fails_every_used_function_says_so_and_runs_nothing() -> None:
    fns = [FunctionStatus("chunk_gated_delta_rule", "fla-core", Status.FALLBACK, "torch_chunk", "not installed",
                          provider="torch"),
           FunctionStatus("attention:sdpa", "torch", Status.FAST, "sdpa", provider="torch"),
           FunctionStatus("causal_conv1d_update", "causal-conv1d", Status.FALLBACK, "x", used=False)]
    rows = [HubRow("SiLU", "layer", True, repo="kernels-community/activation@v1", error="offline", path="load-fails")]
    cause = Finding("hub-not-listable", Severity.BROKEN, "m", "kernelcheck hub --model M --prefetch")
    out = {f.name: f for f in hub_load.fails(fns, rows, [cause])}
    for name in ("chunk_gated_delta_rule", "attention:sdpa"):
        assert out[name].status == Status.BROKEN and out[name].provider == hub_load.LOAD_FAILS_PROVIDER
        assert "kernels-community/activation@v1" in (out[name].reason or "")
        assert "--prefetch" in str(out[name].fix)
    assert out["causal_conv1d_update"].status == Status.FALLBACK  # not used in this mode: not said to run
    ok = [HubRow("SiLU", "layer", True, repo="kernels-community/activation@v1", variant="v", path="hub")]
    assert hub_load.fails(fns, ok, []) == fns


def test_the_answer_names_the_load_it_is_for_and_what_a_cpu_load_then_to_gives() -> None:
    rows = [HubRow("SiLU", "layer", True, repo="kernels-community/activation@v1", phase="load"),
            HubRow("rotary_pos_emb", "layer", True, repo="kernels-community/rotary@v2", phase="load")]
    train = hub_load.device_finding(TH, NAMES, rows, "cuda", "train", 90)
    assert [f.id for f in train] == ["hub-load-device"] and train[0].severity == Severity.INFO
    # a CPU load maps nothing; model.train() after .to("cuda") kernelizes for cuda TRAINING: rotary only
    assert 'device_map="cuda"' in train[0].message and "resolves kernels-community/rotary@v2 (at" in \
        train[0].message
    infer = hub_load.device_finding(TH, NAMES, rows, "cuda", "infer", 90)
    assert "resolves no Hub repository" in infer[0].message
    assert hub_load.device_finding(TH, NAMES, rows, "cpu", "infer", None) == []
