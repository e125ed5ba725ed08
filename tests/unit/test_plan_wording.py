"""The words of each install-plan reason, tested once per kind (core/plan_step.py StepKind, RejectKind).

Everywhere else the tests assert a step's action, kind and fields; here each kind's reason is checked to tell the
person what happened and what to do, on the same constructed machines as tests/unit/test_install_plan.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcheck.core import plan_step
from kernelcheck.core.plan_step import RejectKind, StepKind
from kernelcheck.install import plan, sources, wheels
from tests.kcfixtures import PY_TAG, make_wheel
from tests.unit.test_install_plan import env, fla_candidates, steps_of

PKG = Path(plan.__file__).resolve().parents[1]


def one(p: plan.Plan, package: str) -> plan.Step:
    (s,) = steps_of(p, package)
    return s


def test_every_kind_is_made_somewhere_in_the_package() -> None:
    """A kind no code makes is dead vocabulary; a kind made but not listed fails at import (an enum)."""
    text = "\n".join(p.read_text() for p in PKG.rglob("*.py") if p.name != "plan_step.py")
    unused = [f"{k.__class__.__name__}.{k.name}" for kind in (StepKind, RejectKind) for k in kind
              if f"{kind.__name__}.{k.name}" not in text]
    assert unused == []


def test_docs_install_md_lists_every_kind_a_plan_json_carries() -> None:
    doc = (PKG.parent / "docs" / "install.md").read_text()
    missing = [k.value for kind in (StepKind, RejectKind) for k in kind
               if k not in (StepKind.HUB, RejectKind.HUB_VARIANT) and f"`{k.value}`" not in doc]
    assert missing == []


# ---------------------------------------------------------------- why a step is there

def test_fix_unavailable_says_why_it_was_wanted_and_how_to_get_it(tmp_path: Path) -> None:
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), model="qwen3.8-27b"),
                       fla_candidates(tmp_path))
    tl = one(p, "tilelang")
    assert tl.kind == StepKind.FIX_UNAVAILABLE
    assert "installed by default in train mode" in tl.reason and "--no-fixes" in tl.reason  # wording: renderer test
    assert "pip download tilelang" in tl.reason and "cannot be had here" in tl.reason  # wording: renderer test
    asked = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), with_packages=("tilelang",),
                                                          fixes=False), fla_candidates(tmp_path))
    tl = one(asked, "tilelang")
    assert tl.kind == StepKind.FIX_UNAVAILABLE and "asked for with --with" in tl.reason  # wording: renderer test


def test_fix_change_says_it_changes_a_pinned_package_and_that_it_was_allowed(tmp_path: Path) -> None:
    offered = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), fixes=False),
                             fla_candidates(tmp_path))
    tr = one(offered, "triton")
    assert tr.kind == StepKind.FIX_CHANGE and tr.action == "offer"
    assert "fixes fla-640-refuses" in tr.reason and "changes triton, which kernelcheck never does unless asked" \
        in tr.reason  # wording: renderer test
    c = fla_candidates(tmp_path)
    t = wheels.inspect_wheel(make_wheel(tmp_path, "triton", "3.7.1", files={"triton/__init__.py": b""}))
    c["triton"] = plan.Candidates(wheels=(t,))
    allowed = plan.make_plan(env(), ("fla",), plan.Options(arches=("9.0",), allow_change=frozenset({"triton"}),
                                                           without=("tilelang",)), c)
    tr = one(allowed, "triton")
    assert tr.kind == StepKind.FIX_CHANGE and tr.action == "install" \
        and "you allowed a triton change" in tr.reason  # wording: renderer test


def test_fix_add_offer_names_the_breakage_it_fixes(tmp_path: Path) -> None:
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), fixes=False),
                       fla_candidates(tmp_path))
    tl = one(p, "tilelang")
    assert tl.kind == StepKind.FIX_ADD and tl.reason.startswith("fixes fla-640-refuses (")


def test_pinned_change_names_the_requirement_and_the_way_to_accept_it(tmp_path: Path) -> None:
    c = fla_candidates(tmp_path, reqs=("einops", 'torch>=2.15; extra == "cuda"'), version="0.9.0")
    fla = one(plan.make_plan(env(), ("fla",), plan.Options(arches=("9.0",)), c), "fla-core")
    assert fla.kind == StepKind.PINNED_CHANGE and "torch>=2.15" in fla.reason \
        and "--allow-change" in fla.reason  # wording: renderer test
    (rej,) = [r for r in fla.rejected if r.kind == RejectKind.PINNED_CHANGE]
    assert "torch>=2.15" in rej.reason \
        and "never changed without --allow-change" in rej.reason  # wording: renderer test


def test_cpu_torch_no_gpu_arch_source_build_and_no_candidate_say_what_to_do(tmp_path: Path) -> None:
    sd = tmp_path / "causal_conv1d-1.7.0.tar.gz"
    sd.write_bytes(b"")
    c = {"causal-conv1d": plan.Candidates(sdist=str(sd), sdist_origin="--sdist", release_url="https://x/y.whl",
                                          release_status="unreachable: ConnectionError (offline or blocked)",
                                          release_kind=RejectKind.RELEASE_UNREACHABLE,
                                          build_tools={"setuptools": True, "wheel": True, "ninja": True},
                                          nvcc_arches=("compute_75", "compute_90"))}
    cpu = env(torch="2.13.0+cpu", cuda=None, cap=None)
    (s,) = plan.make_plan(cpu, ("causal_conv1d",), plan.Options(), c).steps
    assert s.kind == StepKind.CPU_TORCH \
        and "CPU build (torch.version.cuda is None)" in s.reason  # wording: renderer test
    assert "install a CUDA build of torch yourself" in s.reason  # wording: renderer test
    (s,) = plan.make_plan(cpu, ("fla",), plan.Options(), fla_candidates(tmp_path)).steps
    assert s.kind == StepKind.CPU_TORCH and "CPU build" in s.reason \
        and "(fla-cpu-crash)" in s.reason  # wording: renderer test
    assert [r.kind for r in s.rejected] == [RejectKind.NOT_NEEDED] and s.rejected[0].reason.startswith("not needed: ")
    (s,) = plan.make_plan(env(cap=None), ("causal_conv1d",), plan.Options(), c).steps
    assert s.kind == StepKind.NO_GPU_ARCH and "--arch 9.0" in s.reason  # wording: renderer test
    (s,) = plan.make_plan(env(), ("causal_conv1d",), plan.Options(arches=("9.0",)), c).steps
    assert s.kind == StepKind.SOURCE_BUILD and "for sm_90 only" in s.reason \
        and "--no-build-isolation" in s.reason  # wording: renderer test
    assert [r.reason for r in s.rejected if r.kind == RejectKind.NO_WHEEL] == ["no causal-conv1d wheel in the "
                                                                              "wheelhouse"]
    assert [r.reason for r in s.rejected if r.kind == RejectKind.RELEASE_UNREACHABLE] == [c["causal-conv1d"]
                                                                                         .release_status]
    (s,) = plan.make_plan(env(nvcc="12.8"), ("causal_conv1d",), plan.Options(arches=("9.0",)), c).steps
    assert s.kind == StepKind.NO_CANDIDATE \
        and "every candidate is listed with its reason" in s.reason  # wording: renderer test
    assert "CUDA major mismatch" in s.rejected[-1].reason \
        and s.rejected[-1].kind == RejectKind.NVCC_CUDA_MAJOR  # wording: renderer test
    (s,) = plan.make_plan(env(cap="10.0"), ("causal_conv1d",), plan.Options(arches=("10.0",)), c).steps
    assert s.rejected[-1].kind == RejectKind.NVCC_ARCH \
        and "cannot target sm_100" in s.rejected[-1].reason  # wording: renderer test


def test_dependency_kinds_name_the_dependency(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("einops") is not None:
        pytest.skip("einops is installed in this test environment")
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="infer", arches=("9.0",)), fla_candidates(tmp_path))
    dep, fla = one(p, "einops"), one(p, "fla-core")
    assert dep.kind == StepKind.DEPENDENCY and dep.reason == "dependency einops"
    assert fla.kind == StepKind.NEWEST_COMPATIBLE and fla.reason.startswith("newest compatible fla-core: its tags fit")
    c = fla_candidates(tmp_path)
    c["einops"] = plan.Candidates(pypi_error="skipped: offline (--offline)")
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="infer", arches=("9.0",), source="build"), c)
    dep, fla = one(p, "einops"), one(p, "fla-core")
    assert dep.kind == StepKind.DEPENDENCY_UNAVAILABLE \
        and "(skipped: offline (--offline))" in dep.reason  # wording: renderer test
    assert fla.kind == StepKind.DEPENDENCY_REFUSED \
        and "its dependency einops cannot be installed" in fla.reason  # wording: renderer test


# ---------------------------------------------------------------- why a candidate was rejected

TARGET = wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", 13, True, ("9.0",))
SO = "causal_conv1d_cuda.so"


def _info(local: str = "cu13torch2.14cxx11abiTRUE", arches: tuple[str, ...] = ("sm_90",), py: str = PY_TAG,
          error: str | None = None) -> wheels.WheelInfo:
    full = f"1.7.0+{local}" if local else "1.7.0"
    name = wheels.parse_wheel_name(f"causal_conv1d-{full}-{py}-{py}-linux_x86_64.whl")
    assert name is not None
    return wheels.WheelInfo(f"/w/{name.filename}", name, "ab" * 32, error is None, error, (), {SO: arches},
                            wheels.build_tag(local))


OTHER_PY = "cp312" if PY_TAG != "cp312" else "cp311"


@pytest.mark.parametrize(("info", "target", "kind", "words"), [
    (_info("cu13torch2.13cxx11abiTRUE"), TARGET, RejectKind.TORCH_MINOR,
     "built for torch 2.13, installed torch is 2.14"),
    (_info("cu12torch2.14cxx11abiTRUE"), TARGET, RejectKind.CUDA_MAJOR, "built for CUDA 12, torch here uses CUDA 13"),
    (_info("cu13torch2.14cxx11abiFALSE"), TARGET, RejectKind.CXX11ABI, "built with cxx11abi FALSE"),
    (_info(arches=("sm_80",)), TARGET, RejectKind.GPU_ARCH, "carries sm_80, nothing that runs on sm_90"),
    (_info(arches=("compute_90",)), TARGET, RejectKind.PTX_ONLY, "has only PTX for sm_90"),
    (_info(py=OTHER_PY), TARGET, RejectKind.WHEEL_TAGS, f"built for {OTHER_PY}"),
    (_info(error="corrupt wheel: BadZipFile: x"), TARGET, RejectKind.WHEEL_FILE, "corrupt wheel"),
    (_info(), wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", None, True, ("9.0",)), RejectKind.CPU_TORCH,
     "torch here is a CPU build"),
    (_info(local=""), TARGET, RejectKind.NEEDS_TRIAL, "no trial import"),
])
def test_a_rejected_wheel_says_what_does_not_fit(info: wheels.WheelInfo, target: wheels.WheelFit, kind: RejectKind,
                                                 words: str) -> None:
    d = wheels.match(info, target, extension="causal_conv1d_cuda")
    assert not d.accepted and d.kind == kind and words in d.reason, d.reason


def test_a_changed_file_and_a_failed_trial_import_say_so() -> None:
    d = wheels.match(_info(), TARGET, expected_sha256="0" * 64)
    assert d.kind == RejectKind.SHA256 \
        and "differs from the expected 0000000000000000..." in d.reason  # wording: renderer test
    trial = wheels.TrialImport("causal_conv1d_cuda", False, "undefined symbol: _ZN3c10", "2.14.0")
    d = wheels.match(_info(local=""), TARGET, extension="causal_conv1d_cuda", trial=trial)
    assert d.kind == RejectKind.TRIAL_FAILED \
        and "failed in a fresh process: undefined symbol" in d.reason  # wording: renderer test


def test_the_release_status_says_missing_unreachable_or_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    assert sources._release_status("https://x/y.whl", offline=True) == (
        "skipped: offline (--offline); the release server was not asked", RejectKind.RELEASE_UNCHECKED)

    class Head:
        def __init__(self, code: int) -> None:
            self.status_code = code

    monkeypatch.setattr(requests, "head", lambda *a, **k: Head(404))
    why, kind = sources._release_status("https://x/y.whl", offline=False)
    assert kind == RejectKind.RELEASE_MISSING and "(HTTP 404)" in why  # wording: renderer test
    monkeypatch.setattr(requests, "head", lambda *a, **k: Head(503))
    assert sources._release_status("https://x/y.whl", offline=False) == ("unreachable: HTTP 503",
                                                                          RejectKind.RELEASE_UNREACHABLE)

    def down(*a: object, **k: object) -> None:
        raise requests.ConnectionError("no route")

    monkeypatch.setattr(requests, "head", down)
    why, kind = sources._release_status("https://x/y.whl", offline=False)
    assert kind == RejectKind.RELEASE_UNREACHABLE and why == ("unreachable: no network: could not connect to x "
                                                              "(offline, or blocked by a firewall or proxy)")


def test_a_wheelhouse_wheel_kernelcheck_built_says_it_is_reused_and_the_release_wheel_says_it_is_checked() -> None:
    info = _info("cu13torch2.11cxx11abiTRUE")
    mine = wheels.WheelInfo(info.path, info.name, info.sha256, True, None, (), {SO: ("sm_90",)}, info.build,
                            {"built_by": "kernelcheck"})
    opts = plan.Options(arches=("9.0",), source="wheelhouse")
    (s,) = plan.make_plan(env(), ("causal_conv1d",), opts, {"causal-conv1d": plan.Candidates(wheels=(mine,))}).steps
    assert s.kind == StepKind.WHEELHOUSE_WHEEL and "matching wheel in the wheelhouse (built by kernelcheck, " \
        "reused: no rebuild): torch 2.11, CUDA 13" in s.reason  # wording: renderer test
    (s,) = plan.make_plan(env(), ("causal_conv1d",), opts, {"causal-conv1d": plan.Candidates(wheels=(info,))}).steps
    assert s.kind == StepKind.WHEELHOUSE_WHEEL and "built by kernelcheck" not in s.reason  # wording: renderer test
    url = "https://x/causal_conv1d-1.7.0+cu13torch2.11cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    (s,) = plan.make_plan(env(), ("causal_conv1d",), plan.Options(arches=("9.0",), source="release"),
                          {"causal-conv1d": plan.Candidates(release_url=url, release_status="exists")}).steps
    assert s.kind == StepKind.RELEASE_WHEEL \
        and "its GPU code checked before install" in s.reason  # wording: renderer test


def test_the_kinds_are_the_json_words() -> None:
    step = plan_step.Step("a", "keep", "installed", "a==1", "r", kind=StepKind.INSTALLED,
                          rejected=(plan_step.Rejected("b", "r", kind=RejectKind.NOT_NEEDED),))
    data = step.to_json()
    assert data["kind"] == "installed" and data["rejected"] == [{"candidate": "b", "reason": "r", "kind": "not-needed"}]
