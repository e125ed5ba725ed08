"""The planner on constructed environments (torch/triton/GPU values this CPU machine does not have).

Steps are asserted by action, kind and fields; the words of each kind's reason are tested once, in
tests/unit/test_plan_wording.py.

The plan is pure: an Environment value, the candidates found, options. These tests feed it the H200
machine's versions (torch 2.11 + CUDA 13, triton 3.6, sm_90) and real wheel files made on disk.
"""

from __future__ import annotations

from pathlib import Path

from kernelcheck.core.environment import Environment
from kernelcheck.core.plan_step import RejectKind, StepKind
from kernelcheck.install import plan, wheels
from tests.environments import make_env
from tests.kcfixtures import PY_TAG, make_wheel

FLA_REQS = ("einops", 'torch>=2.7.0; extra == "cuda"', 'triton>=3.3; extra == "cuda"')


def env(torch="2.11.0+cu130", cuda="13.0", triton="3.6.0", cap="9.0", nvcc="13.0", tilelang=False) -> Environment:
    return make_env(cap or None, torch=torch, cuda=cuda, triton=triton, nvcc=nvcc, tilelang=tilelang,
                    python="3.11.7", python_tag=PY_TAG)


def fla_candidates(tmp: Path, reqs=FLA_REQS, version="0.6.0") -> dict[str, plan.Candidates]:
    w = wheels.inspect_wheel(make_wheel(tmp, "fla-core", version, py="py3", plat="any",
                                        files={"fla/__init__.py": b""}, requires=reqs))
    e = wheels.inspect_wheel(make_wheel(tmp, "einops", "0.8.2", py="py3", plat="any",
                                        files={"einops/__init__.py": b""}))
    return {"fla-core": plan.Candidates(wheels=(w,)), "einops": plan.Candidates(wheels=(e,))}


def steps_of(p: plan.Plan, package: str) -> list[plan.Step]:
    return [s for s in p.steps if s.package == package]


def test_hopper_old_triton_train_without_a_tilelang_source_refuses_the_default_fix(tmp_path: Path):
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), model="qwen3.8-27b"),
                       fla_candidates(tmp_path))
    (tl,) = steps_of(p, "tilelang")
    assert tl.action == "refuse" and tl.role == plan.Role.FIX and tl.severity == "broken"  # the default train fix
    assert tl.kind == StepKind.FIX_UNAVAILABLE  # wanted, but it cannot be had here (not a silent offer)
    assert p.predicted == "broken"
    asked = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), with_packages=("tilelang",),
                                                          fixes=False), fla_candidates(tmp_path))
    (tl,) = steps_of(asked, "tilelang")
    assert tl.action == "refuse" and tl.kind == StepKind.FIX_UNAVAILABLE  # never a silent "offer"


def test_hopper_old_triton_train_says_fla_640_and_offers_both_fixes(tmp_path: Path):
    opts = plan.Options(mode="train", arches=("9.0",), model="qwen3.8-27b", fixes=False)
    p = plan.make_plan(env(), ("fla",), opts, fla_candidates(tmp_path))
    (fla,) = steps_of(p, "fla-core")
    assert fla.action == "install" and fla.spec == "fla-core==0.6.0" and fla.severity == "broken"
    assert fla.rules == ("fla-640-refuses",)
    (tl,) = steps_of(p, "tilelang")
    assert tl.action == "offer" and "--with tilelang" in tl.command
    (tr,) = steps_of(p, "triton")
    assert tr.action == "offer" and tr.spec == "triton>=3.7.1" and "--allow-change triton" in tr.command
    assert p.predicted == "broken"
    # einops is a dependency, installed first
    assert p.steps[0].package == "einops" and p.steps[0].action == "install"


def test_same_machine_infer_mode_or_new_triton_is_ready(tmp_path: Path):
    c = fla_candidates(tmp_path)
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="infer", arches=("9.0",)), c)
    assert steps_of(p, "fla-core")[0].severity == "" and not steps_of(p, "tilelang") and p.predicted == "ready"
    assert steps_of(p, "fla-core")[0].rules == ()
    p = plan.make_plan(env(triton="3.7.1"), ("fla",), plan.Options(mode="train", arches=("9.0",)), c)
    assert p.predicted == "ready"
    p = plan.make_plan(env(tilelang=True), ("fla",), plan.Options(mode="train", arches=("9.0",)), c)
    assert p.predicted == "ready"  # the TileLang backend is there


def test_triton_change_only_with_allow_change(tmp_path: Path):
    c = fla_candidates(tmp_path)
    t = wheels.inspect_wheel(make_wheel(tmp_path, "triton", "3.7.1", files={"triton/__init__.py": b""}))
    c["triton"] = plan.Candidates(wheels=(t,))
    p = plan.make_plan(env(), ("fla",), plan.Options(arches=("9.0",), allow_change=frozenset({"triton"}),
                                                     without=("tilelang",)), c)
    (tr,) = steps_of(p, "triton")
    assert tr.action == "install" and tr.kind == StepKind.FIX_CHANGE and tr.role == plan.Role.FIX


def test_a_candidate_needing_a_torch_change_blocks_the_plan(tmp_path: Path):
    c = fla_candidates(tmp_path, reqs=("einops", 'torch>=2.15; extra == "cuda"'), version="0.9.0")
    p = plan.make_plan(env(), ("fla",), plan.Options(arches=("9.0",)), c)
    (fla,) = steps_of(p, "fla-core")
    assert fla.action == "blocked" and p.blocked and fla.kind == StepKind.PINNED_CHANGE
    assert [(r.candidate, r.kind) for r in fla.rejected if r.kind == RejectKind.PINNED_CHANGE] == [
        (f"{c['fla-core'].wheels[0].name.filename} (wheelhouse)", RejectKind.PINNED_CHANGE)]
    p = plan.make_plan(env(), ("fla",), plan.Options(arches=("9.0",), allow_change=frozenset({"torch"})), c)
    assert steps_of(p, "fla-core")[0].action == "install" and not p.blocked


def test_causal_conv1d_refusals_and_build_reasons(tmp_path: Path):
    sd = tmp_path / "causal_conv1d-1.7.0.tar.gz"
    sd.write_bytes(b"")
    c = {"causal-conv1d": plan.Candidates(sdist=str(sd), sdist_origin="--sdist", release_url="https://x/y.whl",
                                          release_status="unreachable: ConnectionError (offline or blocked)",
                                          release_kind=RejectKind.RELEASE_UNREACHABLE,
                                          build_tools={"setuptools": True, "wheel": True, "ninja": True},
                                          nvcc_arches=("compute_75", "compute_90"))}
    cpu = env(torch="2.13.0+cpu", cuda=None, cap=None)
    (s,) = plan.make_plan(cpu, ("causal_conv1d",), plan.Options(), c).steps
    assert s.action == "refuse" and s.kind == StepKind.CPU_TORCH
    (s,) = plan.make_plan(env(cap=None), ("causal_conv1d",), plan.Options(), c).steps
    assert s.action == "refuse" and s.kind == StepKind.NO_GPU_ARCH
    (s,) = plan.make_plan(env(), ("causal_conv1d",), plan.Options(arches=("9.0",)), c).steps
    assert s.action == "build" and s.kind == StepKind.SOURCE_BUILD and s.arches == ("sm_90",)
    # the release wheel: a rejection with its kind, not a crash
    assert [(r.candidate, r.kind) for r in s.rejected] == [("wheelhouse", RejectKind.NO_WHEEL),
                                                          ("release y.whl", RejectKind.RELEASE_UNREACHABLE)]
    (s,) = plan.make_plan(env(nvcc="12.8"), ("causal_conv1d",), plan.Options(arches=("9.0",)), c).steps
    assert s.action == "refuse" and s.kind == StepKind.NO_CANDIDATE
    assert [r.kind for r in s.rejected] == [RejectKind.NO_WHEEL, RejectKind.RELEASE_UNREACHABLE,
                                            RejectKind.NVCC_CUDA_MAJOR]
    (s,) = plan.make_plan(env(cap="10.0"), ("causal_conv1d",), plan.Options(arches=("10.0",)), c).steps
    assert s.action == "refuse" and [r.kind for r in s.rejected] == [RejectKind.NO_WHEEL,
                                                                     RejectKind.RELEASE_UNREACHABLE,
                                                                     RejectKind.NVCC_ARCH]


def test_a_dependency_that_cannot_be_had_refuses_the_package(tmp_path: Path):
    import importlib.util

    if importlib.util.find_spec("einops") is not None:
        import pytest

        pytest.skip("einops is installed in this test environment")
    c = fla_candidates(tmp_path)
    c["einops"] = plan.Candidates(pypi_error="skipped: offline (--offline)")
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="infer", arches=("9.0",), source="build"), c)
    (dep,) = steps_of(p, "einops")
    (fla,) = steps_of(p, "fla-core")
    assert dep.action == "refuse" and dep.kind == StepKind.DEPENDENCY_UNAVAILABLE and dep.role == plan.Role.DEPENDENCY
    assert fla.action == "refuse" and fla.kind == StepKind.DEPENDENCY_REFUSED and p.predicted == "fallback"
    # with the wheel in the wheelhouse, --source build still takes pure wheels from it
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="infer", arches=("9.0",), source="build"),
                       fla_candidates(tmp_path))
    assert [s.action for s in p.steps] == ["install", "install"] and p.predicted == "ready"


def test_two_fla_candidates_on_hopper_train_with_triton_36_plan_without_an_internal_error(tmp_path: Path):
    # Two fla-core wheels, both hit fla#640 on sm_90 + triton 3.6 in train mode: the planner compares them
    # (this path once used an undefined name and ended in exit 1) and takes the newest, saying why.
    c = fla_candidates(tmp_path, version="0.6.0")
    older = wheels.inspect_wheel(make_wheel(tmp_path, "fla-core", "0.5.0", py="py3", plat="any",
                                            files={"fla/__init__.py": b""}, requires=FLA_REQS))
    c["fla-core"] = plan.Candidates(wheels=(c["fla-core"].wheels[0], older))
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), model="qwen3.8-27b"), c)
    (fla,) = steps_of(p, "fla-core")
    assert fla.action == "install" and fla.spec == "fla-core==0.6.0"
    assert fla.rules == ("fla-640-refuses",) and p.predicted == "broken"


def _with_tilelang(tmp: Path) -> dict[str, plan.Candidates]:
    c = fla_candidates(tmp)
    tl = wheels.inspect_wheel(make_wheel(tmp, "tilelang", "0.1.15", py="py3", plat="any",
                                         files={"tilelang/__init__.py": b""}))
    return {**c, "tilelang": plan.Candidates(wheels=(tl,), resolved=(tl,))}


def test_train_fix_tilelang_without_a_toolkits_nvcc_leaves_fla_640_and_offers_the_toolkit(tmp_path: Path):
    opts = plan.Options(mode="train", arches=("9.0",), model="qwen3.8-27b")
    p = plan.make_plan(env(nvcc=None), ("fla",), opts, _with_tilelang(tmp_path))
    (tl,) = steps_of(p, "tilelang")
    assert tl.action == "install"  # the default train fix is still installed ...
    (fla,) = steps_of(p, "fla-core")
    assert fla.severity == "broken" and fla.rules == ("fla-640-no-nvcc",)  # ... but does not fix it here
    (tk,) = steps_of(p, "cuda-toolkit")
    assert tk.action == "offer" and "-devel" in tk.command and tk.severity == "broken"
    (tr,) = steps_of(p, "triton")
    assert tr.action == "offer" and "--allow-change triton" in tr.command
    assert p.predicted == "broken"
    ok = plan.make_plan(env(), ("fla",), opts, _with_tilelang(tmp_path))  # nvcc of a toolkit: the fix works
    assert not steps_of(ok, "cuda-toolkit") and steps_of(ok, "fla-core")[0].severity == ""
    assert ok.predicted == "ready"


def test_the_cpu_refusal_names_the_fla_crash_only_inside_its_transformers_window():
    """install on a CPU torch with transformers 5.25 said "with transformers 5.15-5.24 an installed fla makes the
    forward crash": a window the installed transformers is not in (5.25 checks the device)."""
    c = {"fla": plan.Candidates()}

    def cpu(transformers: str) -> Environment:
        return make_env(None, torch="2.13.0+cpu", cuda=None, transformers=transformers, python="3.11.7",
                        python_tag=PY_TAG)

    inside = plan.make_plan(cpu("5.24.0"), ("fla",), plan.Options(), c).steps[0]
    after = plan.make_plan(cpu("5.25.0"), ("fla",), plan.Options(), c).steps[0]
    assert inside.kind == after.kind == StepKind.CPU_TORCH
    assert "transformers 5.24.0" in inside.reason and "fla-cpu-crash" in inside.reason
    assert "fla-cpu-crash" not in after.reason and "5.15" not in after.reason
