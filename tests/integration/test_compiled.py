"""verify --compile on the CPU (torch path, tiny shape, aot_eager), and doctor's static torch.compile finding with the
real fla-core 0.6.0 source. The causal-conv1d stand-in (tests/standin.py, behaviour compiler-disabled) is wrapped in
torch.compiler.disable as fla 0.6.0 wraps every op it dispatches: a real graph break of the real model under the
real Dynamo."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcheck.verify.compiled import fix_for
from tests.envs import function, run_json, site
from tests.standin import causal_conv1d_site

pytestmark = pytest.mark.integration


def test_verify_compile_reports_the_breaks_where_and_why_what_ran_compiled_and_the_fix(tmp_path: Path) -> None:
    conv = causal_conv1d_site(tmp_path, "compiler-disabled")
    code, data = run_json(["verify", "--model", "qwen3.8-27b", "--compile"], conv, timeout=900)
    sec = data["compiled"]
    assert (sec["backend"], sec["shape"], sec["device"]) == ("aot_eager", "tiny", "cpu")
    passes = {p["pass"]: p for p in sec["passes"]}
    assert set(passes) == {"infer", "train"}
    for p in passes.values():
        assert p["error"] is None and p["graph_breaks"] >= 1 and p["graphs"] >= 2, p
        br = p["breaks"][0]
        assert "torch.compiler.disable" in br["reason"]  # wording: Dynamo's own message (the break's reason)
        assert "causal_conv1d_fn" in br["explanation"]  # wording: Dynamo's own message (names the function)
        assert br["model_frame"].startswith("transformers/models/qwen3_5/modeling_qwen3_5.py:")
        assert br["fix"] == fix_for(br["reason"], [], None)  # not fla's dispatch: the custom-op / per-layer fix
        parts = {x["part"]: x for x in p["parts"]}
        assert {"model", "decoder-loop", "decoder-layer", "gdn-layer"} <= set(parts)
        assert parts["gdn-layer"]["calls"] >= 1  # the GDN layer ran (eagerly or compiled: as measured)
        assert p["eager_ms"] > 0 and p["compiled_ms"] > 0 and p["compile_s"] > 0
    ids = {f["id"] for f in data["findings"]}
    assert ids & {"compile-runs-eager", "compile-graph-breaks"}
    # the positive control: the compiled run reached the bound (disabled) conv stand-in and ran it; fla is absent,
    # so chunk_gated_delta_rule ran its torch reference and the compiled run says it did not exercise it
    for p in passes.values():
        ops = {o["function"]: o for o in p["fused_ops"]}
        conv, gdn = ops["causal_conv1d_fn"], ops["chunk_gated_delta_rule"]
        assert conv["fast"] == "causal_conv1d.causal_conv1d_fn" and conv["compiler_disabled"] is True
        assert conv["calls"] >= 1 and conv["exercised"] is True and conv["runs"] >= conv["calls"], conv
        assert gdn["fast"] is None and gdn["calls"] >= 1 and gdn["exercised"] is False
    not_run = [f for f in data["findings"] if f["id"] == "compile-op-not-exercised"]
    assert {tuple(f["functions"]) for f in not_run} == {("chunk_gated_delta_rule",)} and len(not_run) == 2
    assert all(f["severity"] == "fallback" for f in not_run) and code == 3


def test_doctor_says_fla_dispatch_breaks_the_graph_and_names_pip_fla_as_what_runs() -> None:
    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    code, data = run_json(["doctor", "--model", "qwen3.8-27b", "--arch", "9.0", "--mode", "train"], fla)
    chunk = function(data, "chunk_gated_delta_rule")
    assert chunk["provider"].startswith("pip:fla-core 0.6.0 / "), chunk
    static = [f for f in data["findings"] if f["id"] == "compile-graph-breaks-static"]
    assert static and static[0]["functions"] == ["chunk_gated_delta_rule"]
    # fla 0.6.0 puts its own @torch.compiler.disable on chunk_gated_delta_rule above @dispatch: the switch that
    # unwraps the dispatch leaves the decorator, so it is no fix here
    assert "@torch.compiler.disable on the op" in static[0]["reference"]
    assert static[0]["fix"].startswith("wrap chunk_gated_delta_rule in a torch.library.custom_op")


def test_compile_with_step_or_packing_is_bad_input_and_runs_nothing() -> None:
    from tests.envs import run

    for extra in (["--step"], ["--packing"]):
        res = run(["verify", "--model", "qwen3.8-27b", "--compile", *extra])
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
