"""fla's backend dispatch (integrations/fla_dispatch.py) and the rules keyed on it, with explicit Environment values.

Each case is a machine this CPU box is not (the H200 image with nvcc hidden, pip's nvcc, a B200, an A100), described
as the probe describes it. The layouts are matrix/fla_dispatch.toml's rows, which test_fla_dispatch_source checks
against the real fla-core wheels' source. The H200 differential run (benchmarks/) checks the same verdicts for real.
"""

from __future__ import annotations

import functools

import pytest

from kernelcheck.core import matrix, rules
from kernelcheck.core.device import Device
from kernelcheck.core.environment import Environment
from kernelcheck.core.status import FunctionStatus
from kernelcheck.doctor import backends as backends_mod
from kernelcheck.integrations import fla_dispatch
from tests.environments import make_env

GDN = ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule")
KDA = ("chunk_kda", "fused_recurrent_kda")

M = matrix.load()  # the matrix doctor passes down


def h200(**kw) -> Environment:
    """The H200 image `kernelcheck install --mode train` made: fla-core 0.6.0, tilelang, triton 3.6.0, a toolkit."""
    base = {"fla": "0.6.0", "tilelang": True, "triton": "3.6.0"}
    return make_env(kw.pop("cap", "9.0"), **{**base, **kw})


def ops(env: Environment, fns=GDN) -> dict[str, fla_dispatch.OpBackend]:
    lay = fla_dispatch.from_table(env.version_of("fla"), m=M)
    return {f"{o.function}/{o.phase}": o for o in fla_dispatch.decide(lay, env, fns)}


def hits(env: Environment, mode: str = "train", fns=GDN) -> dict[str, rules.RuleHit]:
    facts = rules.Facts(env=env, mode=mode, bound=frozenset({"fla", "causal_conv1d"}), model="qwen3.8-27b",
                        functions=fns, fla_dispatch=functools.partial(fla_dispatch.backends, m=M))
    return {h.rule.id: h for h in rules.evaluate(facts, matrix.load())}


def verdict(h: dict[str, rules.RuleHit]) -> str:
    """What doctor's verdict becomes from these hits (certain broken hits make it broken)."""
    return "broken" if any(x.certain and x.rule.severity == "broken" for x in h.values()) else "ready"


@pytest.fixture(autouse=True)
def _table_layouts(monkeypatch):
    # the Environment values name fla versions that are not installed here: the table is what layout() reads then;
    # pinned so that an fla-core installed in this venv cannot change the answers
    monkeypatch.setattr(fla_dispatch, "layout", lambda env, m: fla_dispatch.from_table(env.version_of("fla"), m=m))


def test_the_train_install_on_the_h200_runs_the_backward_on_tilelang_and_nothing_breaks():
    o = ops(h200())
    assert (o["chunk_gated_delta_rule/forward"].backend, o["chunk_gated_delta_rule/backward"].backend) == \
        ("triton", "tilelang")
    assert o["chunk_gated_delta_rule/backward"].cause == "default"
    assert o["chunk_gated_delta_rule/backward"].outcome == "ok"
    assert o["fused_recurrent_gated_delta_rule/forward"].backend == "triton"
    assert verdict(hits(h200())) == "ready"


def test_nvcc_absent_train_hopper_old_triton_is_broken_with_both_fixes():
    env = h200(nvcc=None)
    bwd = ops(env)["chunk_gated_delta_rule/backward"]
    assert (bwd.backend, bwd.cause, bwd.outcome) == ("triton", "no-nvcc", "raises-640")
    h = hits(env)
    assert set(h) == {"fla-640-no-nvcc"} and h["fla-640-no-nvcc"].certain
    assert verdict(h) == "broken"
    assert "--allow-change triton" in h["fla-640-no-nvcc"].fix \
        and "toolkit" in h["fla-640-no-nvcc"].fix  # wording: renderer test
    assert h["fla-640-no-nvcc"].rule.severity == "broken" and h["fla-640-no-nvcc"].rule.functions
    kinds = {r["package"]: r["kind"] for r in h["fla-640-no-nvcc"].rule.remedies}
    assert kinds == {"cuda-toolkit": "image", "triton": "change"}


def test_nvcc_absent_is_fine_for_inference_and_with_triton_371():
    assert hits(h200(nvcc=None), mode="infer") == {}
    env = h200(nvcc=None, triton="3.7.1")
    assert ops(env)["chunk_gated_delta_rule/backward"].outcome == "ok"
    assert verdict(hits(env)) == "ready"


def test_pips_nvcc_counts_for_fla_but_not_for_tilelangs_jit():
    env = h200(nvcc_source="pip")  # nvidia-cuda-nvcc 13.0.88, with or without CUDA_HOME pointing at it
    bwd = ops(env)["chunk_gated_delta_rule/backward"]
    assert (bwd.backend, bwd.cause) == ("tilelang", "jit-pip-nvcc")
    h = hits(env)
    assert set(h) == {"tilelang-jit-pip-nvcc"} and verdict(h) == "broken"
    assert "toolkit" in h["tilelang-jit-pip-nvcc"].fix  # wording: renderer test
    # newer triton does not help: fla still picks TileLang on Hopper with triton >= 3.4
    assert verdict(hits(h200(nvcc_source="pip", triton="3.7.1"))) == "broken"


def test_tilelang_absent_is_the_classic_640_refusal():
    env = h200(tilelang=False)
    assert ops(env)["chunk_gated_delta_rule/backward"].cause == "tilelang-absent"
    assert set(hits(env)) == {"fla-640-refuses"}


def test_tvm_ffi_outside_tilelangs_window_breaks_the_backward_that_fla_still_sends_to_tilelang():
    # fla 0.5.2 imports tilelang only inside the call; fla 0.6.0 imports it with fla.ops when nvcc is there
    # (fla/ops/utils/sinkhorn/__init__.py), so there `import fla.ops` itself fails and transformers binds the torch
    # path: doctor's import probe sees that (tests/integration/test_fla_dispatch_source.py), fla is then not bound
    # at all
    env = h200(fla="0.5.2", unmet=("tilelang:apache-tvm-ffi",))
    bwd = ops(env)["chunk_gated_delta_rule/backward"]
    assert (bwd.backend, bwd.cause) == ("tilelang", "tilelang-import-fails")  # fla checks find_spec, not import
    h = hits(env)
    assert {"tilelang-import-fails-in-backward", "tilelang-tvm-ffi-window"} <= set(h)
    assert verdict(h) == "broken"
    assert verdict(hits(h200(fla="0.5.2"), mode="train")) == "ready"  # inside the window: nothing


@pytest.mark.parametrize("switch", [{"FLA_TILELANG": "0"}, {"FLA_DISABLE_BACKEND_DISPATCH": "1"}])
def test_switching_tilelang_off_sends_the_hopper_backward_to_the_raising_triton_kernel(switch):
    env = h200(env_vars=switch)
    bwd = ops(env)["chunk_gated_delta_rule/backward"]
    assert bwd.backend == "triton" and bwd.outcome == "raises-640"
    assert set(hits(env)) == {"fla-640-tilelang-off"}
    assert verdict(hits(h200(env_vars=switch, triton="3.7.1"))) == "ready"


def test_ampere_and_blackwell_keep_triton_for_the_gdn_backward_unless_forced():
    for cap in ("8.0", "10.0"):
        bwd = ops(h200(cap=cap, triton="3.8.0"))["chunk_gated_delta_rule/backward"]
        assert (bwd.backend, bwd.cause, bwd.outcome) == ("triton", "not-default", "ok")
    forced = ops(h200(cap="10.0", triton="3.8.0", env_vars={"FLA_TILELANG": "1"}))["chunk_gated_delta_rule/backward"]
    assert (forced.backend, forced.cause) == ("tilelang", "forced")
    assert "fla-tilelang-forced-blackwell" in hits(h200(cap="10.0", triton="3.8.0", env_vars={"FLA_TILELANG": "1"}))
    assert hits(h200(cap="8.0", triton="3.6.0")) == {}


def test_kda_backward_runs_tilelang_wherever_it_is_usable_so_pips_nvcc_breaks_it_on_ampere_too():
    o = ops(h200(cap="8.0"), KDA)
    assert o["chunk_kda/backward"].backend == "tilelang" and o["chunk_kda/forward"].backend == "triton"
    h = hits(h200(cap="8.0", nvcc_source="pip"), fns=KDA)
    assert set(h) == {"tilelang-jit-pip-nvcc"}
    # KDA's Triton backward has no fla#640 kernel: no nvcc on the H200 is fine for KDA
    assert hits(h200(nvcc=None), fns=KDA) == {}


def test_fla_052_dispatches_like_060_for_the_differential_rows():
    for kw, want in (({}, "ready"), ({"nvcc": None}, "broken"), ({"tilelang": False}, "broken"),
                     ({"env_vars": {"FLA_TILELANG": "0"}}, "broken"), ({"nvcc_source": "pip"}, "broken")):
        assert verdict(hits(h200(fla="0.5.2", **kw))) == want, kw
        assert verdict(hits(h200(fla="0.6.0", **kw))) == want, kw
    assert fla_dispatch.from_table("0.5.2", m=M).flash_qla == ("9.*", "10.*")
    assert "12.0" in fla_dispatch.from_table("0.6.0", m=M).flash_qla


def test_fla_051_imports_tilelang_without_looking_for_nvcc_so_the_jit_fails():
    bwd = ops(h200(fla="0.5.1", nvcc=None))["chunk_gated_delta_rule/backward"]
    assert (bwd.backend, bwd.cause) == ("tilelang", "jit-no-nvcc")
    assert "tilelang-jit-no-nvcc" in hits(h200(fla="0.5.1", nvcc=None))
    assert set(hits(h200(fla="0.5.1", tilelang=False, triton="3.8.0"))) == {"fla-640-refuses-any-triton"}


def test_old_fla_has_no_dispatch_and_computes_wrong_gradients_silently():
    bwd = ops(h200(fla="0.4.2"))["chunk_gated_delta_rule/backward"]
    assert (bwd.backend, bwd.cause, bwd.outcome) == ("triton", "no-tilelang-backend", "wrong-grads-640")
    assert set(hits(h200(fla="0.4.2"))) == {"fla-640-wrong-grads"}


def test_flash_qla_installed_takes_the_op_but_its_verifier_makes_it_a_may_apply():
    env = h200(present={"flash_qla": True}, nvcc=None)
    o = ops(env)
    assert o["chunk_gated_delta_rule/backward"].backend == "flash_qla"
    assert not o["chunk_gated_delta_rule/backward"].certain  # K = V = 128 and bf16 decide at call time
    h = hits(env)
    assert "tilelang-jit-no-nvcc" in h and not h["tilelang-jit-no-nvcc"].certain
    assert ops(h200(present={"flash_qla": True}, env_vars={"FLA_FLASH_QLA": "0"}))[
        "chunk_gated_delta_rule/backward"].backend == "tilelang"


def test_an_unknown_dispatch_layout_makes_the_rules_uncertain_never_a_crash():
    lay = fla_dispatch.Layout("9.9.9", "source", problems=("no BackendRegistry",))
    got = fla_dispatch.decide(lay, h200(), GDN)
    assert {o.backend for o in got} == {"unknown"}
    assert rules.backend_matches(got, ["chunk_gated_delta_rule/backward triton:no-nvcc"]) is None


def test_no_gpu_or_no_fla_decides_nothing():
    assert ops(make_env(None, fla="0.6.0")) == {}
    assert fla_dispatch.decide(fla_dispatch.from_table(None, m=M), h200(), GDN) == []


def _fs(name: str, status: str = "fast") -> FunctionStatus:
    return FunctionStatus(name, "fla-core", status, "fla.ops...", None, None, "prefill")


GPU_HERE = Device("cuda", "gpu-visible", True)


def test_doctor_section_reports_each_pass_and_infer_mode_only_the_forward():
    data, findings = backends_mod.section(h200(nvcc=None), GPU_HERE, [_fs("chunk_gated_delta_rule")], "train", M)
    assert data is not None
    assert [(o.phase, o.backend, o.cause) for o in data.ops] == [
        ("forward", "triton", "default"), ("backward", "triton", "no-nvcc")]
    assert data.nvcc_source == "none" and data.read_from == "table"
    assert [(f.id, f.severity, f.functions) for f in findings] == [("fla-backend", "info", ("chunk_gated_delta_rule",))]
    data, _ = backends_mod.section(h200(), GPU_HERE, [_fs("chunk_gated_delta_rule")], "infer", M)
    assert data is not None and [o.phase for o in data.ops] == ["forward"]
    assert backends_mod.section(h200(), GPU_HERE, [_fs("chunk_gated_delta_rule", "fallback")], "train", M) == (None, [])
    unsupported = [_fs("chunk_gated_delta_rule", "unsupported")]
    assert backends_mod.section(h200(), GPU_HERE, unsupported, "train", M)[0] is not None


def test_doctor_section_says_when_the_dispatch_cannot_be_read(monkeypatch):
    monkeypatch.setattr(fla_dispatch, "layout", lambda env, m: fla_dispatch.Layout("9.9.9", "source",
                                                                                   problems=("no registry",)))
    _, findings = backends_mod.section(h200(), GPU_HERE, [_fs("chunk_gated_delta_rule")], "train", M)
    assert [f.id for f in findings][0] == "fla-dispatch-unknown"
    assert findings[0].severity == "warning"


def _pip_nvcc_dist(root, version: str = "13.0.88") -> None:
    """A dist-info laid out as pip installs nvidia-cuda-nvcc 13.x (its RECORD lists nvidia/cu13/bin/nvcc)."""
    info = root / f"nvidia_cuda_nvcc-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nvidia-cuda-nvcc\nVersion: {version}\n")
    (info / "RECORD").write_text("nvidia/cu13/bin/nvcc,,\nnvidia/cu13/bin/ptxas,,\n")
    bin_dir = root / "nvidia/cu13/bin"
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)


def test_the_probe_finds_pips_nvcc_as_fla_and_tilelang_do(tmp_path, monkeypatch):
    from kernelcheck.core import environment

    assert environment.pip_nvcc() is None  # none in this venv
    _pip_nvcc_dist(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert environment.pip_nvcc() == str(tmp_path / "nvidia/cu13/bin/nvcc")


def test_cuda_home_without_nvcc_while_nvcc_is_on_path_breaks_the_tilelang_backward():
    """fla counts the nvcc on PATH and picks TileLang; TileLang compiles with $CUDA_HOME/bin/nvcc only."""
    env = h200(jit_nvcc="cuda-home-no-nvcc")
    bwd = ops(env)["chunk_gated_delta_rule/backward"]
    assert (bwd.backend, bwd.outcome) == ("tilelang", "jit-cuda-home-no-nvcc")
    h = hits(env)
    assert set(h) == {"tilelang-jit-cuda-home-no-nvcc"} and verdict(h) == "broken"
    assert "unset CUDA_HOME" in h["tilelang-jit-cuda-home-no-nvcc"].fix
    assert hits(env, mode="infer") == {}  # the forward is Triton: inference is unaffected
    assert verdict(hits(h200())) == "ready"  # the same machine with CUDA_HOME right


def test_the_probe_reads_cuda_home_as_tilelang_does(tmp_path, monkeypatch):
    from kernelcheck.core import environment

    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    assert environment.tilelang_jit_nvcc("toolkit") is None  # unset: TileLang finds what fla finds
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-such-toolkit"))
    assert environment.tilelang_jit_nvcc("toolkit") == "cuda-home-no-nvcc"
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("#!/bin/sh\n")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert environment.tilelang_jit_nvcc("toolkit") is None  # the same kind of nvcc as fla's
