"""What runs for each function (doctor/provider.py; the provider is decided in core/decide.py): the pip build, the
Hub build that replaces it, torch; and the Hub fla build's own dispatch judged as the code that runs, read from a
build folder on disk (tests/kernel_repos.py lays it out) or from its recorded layout (matrix/fla_dispatch.toml).
Environments are explicit values for machines this CPU box is not (tests/environments.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcheck.core import decide, matrix
from kernelcheck.core.status import Finding, FunctionStatus, Severity
from kernelcheck.doctor import provider
from kernelcheck.integrations import fla_dispatch
from kernelcheck.integrations.kernels_hub import Resolution
from kernelcheck.report.hub import HubRow, HubTransformers
from kernelcheck.report.model import HubSection, Report
from tests.environments import make_env
from tests.kernel_repos import write_fla_build

M = matrix.load()

GDN = ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule")
CU130 = "torch211-cxx11-cu130-x86_64-linux"
SPEC = "kernels-community/fla@v3"


def _ops(lay: fla_dispatch.Layout, env) -> dict[str, fla_dispatch.OpBackend]:
    return {f"{o.function}/{o.phase}": o for o in fla_dispatch.decide(lay, env, GDN)}


def test_the_hub_fla_build_read_from_its_files_checks_only_that_tilelang_imports(tmp_path: Path) -> None:
    lay = fla_dispatch.hub_layout("kernels-community/fla", 3, write_fla_build(tmp_path / CU130), m=M)
    assert (lay.origin, lay.known, lay.tilelang_check, lay.guard, lay.flash_qla) == (
        "hub-cache", True, "import", ">=3.4.0,<3.7.1", ())
    # one folder down (a build that keeps its package in a subfolder) reads the same
    nested = fla_dispatch.hub_layout("kernels-community/fla", 3, write_fla_build(tmp_path / "v2" / "fla").parent, m=M)
    assert (nested.origin, nested.tilelang_check) == ("hub-cache", "import")


def test_the_hub_fla_build_not_on_disk_is_its_recorded_layout_and_says_what_is_assumed(tmp_path: Path) -> None:
    lay = fla_dispatch.hub_layout("kernels-community/fla", 3, tmp_path / "absent", m=M)
    assert (lay.origin, lay.known, lay.tilelang_check, lay.flash_qla) == ("hub-table", True, "import", ())
    assert lay.assumed
    assert not fla_dispatch.hub_layout("kernels-community/fla", 9, None, m=M).known  # a version nothing records


@pytest.mark.parametrize("triton", ["3.6.0", "3.7.1"])
def test_tilelang_without_nvcc_the_hub_copy_jit_crashes_where_pip_fla_060_does_not_pick_tilelang(triton) -> None:
    env = make_env("9.0", fla="0.6.0", tilelang=True, nvcc=None, triton=triton)
    hub = _ops(fla_dispatch.hub_layout("kernels-community/fla", 3, None, m=M), env)["chunk_gated_delta_rule/backward"]
    pip = _ops(fla_dispatch.from_table("0.6.0", m=M), env)["chunk_gated_delta_rule/backward"]
    assert (hub.backend, hub.outcome) == ("tilelang", "jit-no-nvcc")  # fla#949
    assert (pip.backend, pip.cause) == ("triton", "no-nvcc")  # has_usable_nvcc: falls back to Triton
    assert pip.outcome == ("raises-640" if triton == "3.6.0" else "ok")


def test_backend_words_name_one_backend_or_each_pass() -> None:
    env = make_env("9.0", fla="0.6.0", tilelang=True)
    ops = fla_dispatch.decide(fla_dispatch.from_table("0.6.0", m=M), env, GDN)
    assert provider.backend_words(ops, "chunk_gated_delta_rule") == "fwd Triton, bwd TileLang"
    assert provider.backend_words(ops, "fused_recurrent_gated_delta_rule") == "Triton"
    assert provider.backend_words(ops, "causal_conv1d_fn") == ""


def test_builds_name_the_installed_distribution_and_version_and_torch_for_the_rest() -> None:
    env = make_env("9.0", fla="0.6.0", tilelang=True)
    fns = [FunctionStatus("chunk_gated_delta_rule", "fla-core", "fast", "fla.ops.chunk_gated_delta_rule"),
           FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fallback", "torch_causal_conv1d", "absent"),
           FunctionStatus("attention:sdpa", "torch", "fast", "sdpa")]
    ops = tuple(fla_dispatch.decide(fla_dispatch.from_table("0.6.0", m=M), env, GDN))
    got = provider.builds(fns, env, ops, matrix.load())
    assert got["chunk_gated_delta_rule"] == decide.Build("fla-core", "0.6.0", "fwd Triton, bwd TileLang")
    assert got["causal_conv1d_fn"] == decide.Build("causal-conv1d", None, "")
    assert got["attention:sdpa"] == decide.TORCH
    provided = {f.name: decide.decide(f, build=got[f.name]).provider for f in fns}
    assert provided == {"chunk_gated_delta_rule": "pip:fla-core 0.6.0 / fwd Triton, bwd TileLang",
                        "causal_conv1d_fn": "torch", "attention:sdpa": "torch"}


def _hub_report(env, location: str | None, source: str = "hf-cache") -> Report:
    """A doctor report after the Hub check of transformers 5.25's default: chunk_gated_delta_rule replaced by the
    Hub fla build, pip's fla-core 0.6.0 bound (its fla#640 finding still in the report)."""
    th = HubTransformers("5.25.0", "0.19.1", ">=0.19.1,<0.20", "src", True, "YES", False, True, True, "src", True,
                         "src")
    res = Resolution("kernels-community/fla", 3, None, source, location, "v3", "c" * 40, (), CU130)
    row = HubRow("chunk_gated_delta_rule", "function", True, repo=SPEC, layer="chunk_gated_delta_rule",
                 source=source, variant=CU130, path="hub")
    hub = HubSection([], True, "default", "cuda", "train", True, th, [], [row], [res])
    fs = FunctionStatus("chunk_gated_delta_rule", "fla-core", "fast", "fla.ops.chunk_gated_delta_rule",
                        provider="pip:fla-core 0.6.0 / fwd Triton, bwd Triton")
    ev = decide.HubEvidence(fs.name, f"Hub kernel {SPEC} chunk_gated_delta_rule ({CU130})", SPEC, CU130)
    rep = Report("doctor", None, None, "train", [decide.decide(fs, hub=ev)],
                 [Finding("fla-640-no-nvcc", Severity.BROKEN, "pip fla raises", None, None, (fs.name,))], hub=hub)
    return rep


def test_under_the_hub_default_the_hub_build_is_judged_and_pip_findings_are_not_in_effect(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    write_fla_build(snap / "build" / CU130)
    env = make_env("9.0", fla="0.6.0", tilelang=True, nvcc=None, triton="3.7.1")
    rep = _hub_report(env, str(snap))
    provider.apply_hub(rep, env, "train", "qwen3.8-27b", m=M)
    fs = rep.functions[0]
    assert fs.status == "broken"
    assert fs.provider == f"hub:{SPEC} (variant {CU130}) / fwd Triton, bwd TileLang"
    ids = {f.id: f for f in rep.findings}
    assert ids["hub-fla-backend-fails"].severity == "broken" and "hub-fla-layout-assumed" not in ids
    assert ids["fla-640-no-nvcc"].severity == "info"  # about pip's fla, which does not run
    assert rep.backends is not None and rep.backends.read_from == "hub-cache"
    assert decide.verdict(rep.functions, rep.findings) == "broken"


def test_the_hub_build_not_on_disk_is_judged_from_its_recorded_layout_with_a_warning() -> None:
    env = make_env("9.0", fla="0.6.0", tilelang=True, nvcc=None, triton="3.7.1")
    rep = _hub_report(env, None, source="hub")
    provider.apply_hub(rep, env, "train", "qwen3.8-27b", m=M)
    ids = {f.id for f in rep.findings}
    assert {"hub-fla-layout-assumed", "hub-fla-backend-fails"} <= ids
    assert rep.functions[0].status == "broken"


def test_with_the_toolkit_the_hub_build_runs_tilelang_and_nothing_breaks(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    write_fla_build(snap / "build" / CU130)
    env = make_env("9.0", fla="0.6.0", tilelang=True, triton="3.6.0")
    rep = _hub_report(env, str(snap))
    provider.apply_hub(rep, env, "train", "qwen3.8-27b", m=M)
    assert rep.functions[0].status == "fast"
    assert "hub-fla-backend-fails" not in {f.id for f in rep.findings}
    # inference runs only the forward: no backward backend is judged
    rep = _hub_report(env, str(snap))
    provider.apply_hub(rep, make_env("9.0", tilelang=True, nvcc=None, triton="3.6.0"), "infer", "q", m=M)
    assert rep.functions[0].status == "fast"


def test_kernels_switches_and_unreadable_variant_names(tmp_path: Path, monkeypatch) -> None:
    env = make_env("9.0")
    rep = _hub_report(env, str(tmp_path))
    assert "hub-all-latest" in {f.id for f in provider.kernels_findings(rep, {"UNSTABLE_KERNELS_ALL_LATEST": "1"})}
    assert not provider.kernels_findings(rep, {"UNSTABLE_KERNELS_ALL_LATEST": "0"})
    new = "torch-2.12-cxx11-cuda-13.0-cpython-3.12-abi3-x86_64-linux"
    (tmp_path / "build" / new).mkdir(parents=True)
    (tmp_path / "build" / CU130).mkdir(parents=True)
    assert provider.unreadable_variants(str(tmp_path), [CU130], "0.18.3") == [new]  # on disk, not listed
    assert provider.unreadable_variants(None, [CU130, new], "0.18.3") == [new]  # listed in 0.19's naming
    assert provider.unreadable_variants(str(tmp_path), [CU130, new], "0.19.1") == []


def test_an_unsupported_function_runs_the_package_it_is_bound_to_unless_the_torch_function_is_bound() -> None:
    env = make_env(None, fla="0.6.0")
    fns = [FunctionStatus("causal_conv1d_fn", "causal-conv1d", "unsupported", "causal_conv1d.causal_conv1d_fn", "cpu"),
           FunctionStatus("chunk_gated_delta_rule", "fla-core", "unsupported",
                          "transformers.models.qwen3_5.modeling_qwen3_5.torch_chunk_gated_delta_rule", "cpu")]
    got = provider.builds(fns, env, (), matrix.load())
    assert got["causal_conv1d_fn"].distribution == "causal-conv1d"  # 5.17-5.24: the kernel is called on CPU inputs
    assert got["chunk_gated_delta_rule"] == decide.TORCH  # 5.25: the per-call device check runs the torch function


def test_verify_says_its_layers_load_no_hub_kernel_where_the_job_does() -> None:
    rep = _hub_report(make_env("9.0"), None)
    got = provider.verify_hub_note(rep)
    assert [(f.id, f.functions) for f in got] == [("verify-hub-not-applied", ("chunk_gated_delta_rule",))]
    rep.functions = [FunctionStatus("chunk_gated_delta_rule", "fla-core", "fast", "x", provider="pip:fla-core 0.6.0")]
    assert provider.verify_hub_note(rep) == []
