"""The environment a source build of a CUDA-extension package runs with, as the plan and apply produce it.

mamba-ssm's main builds its CUDA extension selective_scan_cuda only with MAMBA_KEEP_CUDA_BUILD=TRUE since mamba#977;
without it the build succeeds, the wheel imports, and the first Mamba-1 forward raises (breakages.toml
mamba-selective-scan-cuda-missing). The variable is data (matrix/packages.toml `build_env`); the sdist's own
reading of these variables is run in tests/integration/test_build_env.py.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput, BuildFailed
from kernelcheck.core.plan_step import RejectKind, StepKind
from kernelcheck.install import apply, build, plan, wheels
from tests.environments import make_env
from tests.kcfixtures import PY_TAG, make_wheel

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def _env():
    return make_env("9.0", torch="2.11.0+cu130", cuda="13.0", triton="3.6.0", nvcc="13.0", python="3.11.7",
                    python_tag=PY_TAG)


def _environ(package: str, base: dict[str, str] | None = None) -> dict[str, str]:
    pkg = matrix.load().packages[package]
    return build.build_environ(base or {}, env_prefix=pkg.env_prefix, package_env=pkg.build_env, arches=("9.0",),
                               torch_mm="2.11", cuda_major=13, cxx11abi=True, jobs=4, tmp=Path("/tmp/kc-build"))


def test_packages_toml_gives_mamba_ssm_its_keep_cuda_build_switch():
    m = matrix.load()
    assert dict(m.packages["mamba_ssm"].build_env) == {"MAMBA_KEEP_CUDA_BUILD": "TRUE"}
    assert m.packages["causal_conv1d"].build_env == ()


def test_a_mamba_ssm_build_keeps_selective_scan_cuda_and_overrides_a_skip_left_in_the_environment():
    got = _environ("mamba_ssm", {"MAMBA_SKIP_CUDA_BUILD": "TRUE", "PATH": "/usr/bin"})
    assert {k: got[k] for k in ("MAMBA_FORCE_BUILD", "MAMBA_SKIP_CUDA_BUILD", "MAMBA_KEEP_CUDA_BUILD",
                                "MAMBA_FORCE_CXX11_ABI", "MAMBA_LOCAL_VERSION", "TORCH_CUDA_ARCH_LIST")} == {
        "MAMBA_FORCE_BUILD": "TRUE", "MAMBA_SKIP_CUDA_BUILD": "FALSE", "MAMBA_KEEP_CUDA_BUILD": "TRUE",
        "MAMBA_FORCE_CXX11_ABI": "TRUE", "MAMBA_LOCAL_VERSION": "cu13torch2.11cxx11abiTRUE",
        "TORCH_CUDA_ARCH_LIST": "9.0"}
    assert got["PATH"] == "/usr/bin"


def test_only_mamba_ssm_gets_a_keep_variable():
    got = _environ("causal_conv1d")
    assert (got["CAUSAL_CONV1D_FORCE_BUILD"], got["CAUSAL_CONV1D_SKIP_CUDA_BUILD"]) == ("TRUE", "FALSE")
    assert not [k for k in got if "KEEP" in k]


def _mamba_plan(tmp: Path) -> plan.Plan:
    sd = tmp / "mamba_ssm-2.3.2.post1.tar.gz"
    sd.write_bytes(b"")
    c = {"mamba-ssm": plan.Candidates(sdist=str(sd), sdist_origin="--sdist",
                                      build_tools={"setuptools": True, "wheel": True, "ninja": True},
                                      nvcc_arches=("compute_75", "compute_90"))}
    return plan.make_plan(_env(), ("mamba_ssm",), plan.Options(arches=("9.0",), source="build"), c)


def test_the_planned_build_of_mamba_ssm_names_the_variables_it_builds_with(tmp_path: Path):
    (s,) = [s for s in _mamba_plan(tmp_path).steps if s.import_name == "mamba_ssm"]
    assert s.action == "build" and s.kind == StepKind.SOURCE_BUILD
    assert s.command.startswith("MAMBA_FORCE_BUILD=TRUE MAMBA_SKIP_CUDA_BUILD=FALSE MAMBA_KEEP_CUDA_BUILD=TRUE "), \
        s.command
    assert "MAMBA_SSM_" not in s.command  # the prefix is packages.toml's env_prefix, not the distribution's name


def test_apply_builds_mamba_ssm_with_its_build_env_and_extension(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    p = _mamba_plan(tmp_path)
    seen: dict = {}

    class Stop(Exception):
        pass

    def fake_build(sdist: Path, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(build, "build_wheel", fake_build)
    with pytest.raises(Stop):
        apply.prepare(p, _env(), tmp_path / "wh", lambda _: None, m=matrix.load())
    assert (seen["env_prefix"], seen["package_env"], seen["extension"]) == \
        ("MAMBA", (("MAMBA_KEEP_CUDA_BUILD", "TRUE"),), "selective_scan_cuda")


def _mamba_wheel(tmp: Path, with_extension: bool) -> Path:
    files = {"mamba_ssm/__init__.py": b"__version__ = '2.3.2.post1'\n"}
    if with_extension:
        files[f"selective_scan_cuda{SUFFIX}"] = b"not elf"
    return make_wheel(tmp, "mamba-ssm", "2.3.2.post1+cu13torch2.11cxx11abiTRUE", files=files)


def test_a_mamba_ssm_wheel_without_selective_scan_cuda_is_rejected(tmp_path: Path):
    target = wheels.WheelFit(PY_TAG, "linux_x86_64", "2.11", 13, True, ("9.0",))
    info = wheels.inspect_wheel(_mamba_wheel(tmp_path, with_extension=False))
    assert info is not None
    d = wheels.match(info, target, extension="selective_scan_cuda")
    assert (d.accepted, d.kind) == (False, RejectKind.NO_EXTENSION)
    assert wheels.match(info, target).accepted  # a package that names no extension: its tags decide


def test_a_build_whose_wheel_lacks_the_extension_fails_before_the_wheelhouse(tmp_path: Path):
    bare = _mamba_wheel(tmp_path / "a", with_extension=False)
    with pytest.raises(BuildFailed) as got:
        build._require_extension(bare, "selective_scan_cuda", "MAMBA", (("MAMBA_KEEP_CUDA_BUILD", "TRUE"),),
                                 tmp_path / "log")
    message = str(got.value)  # the one test of this failure's words: install prints them as they are
    assert "selective_scan_cuda" in message and "MAMBA_KEEP_CUDA_BUILD=TRUE" in message  # wording: renderer test
    build._require_extension(_mamba_wheel(tmp_path / "b", with_extension=True), "selective_scan_cuda", "MAMBA",
                             (), tmp_path / "log")


@pytest.mark.parametrize("value", [["MAMBA_KEEP_CUDA_BUILD=TRUE"], {"keep": "TRUE"}, {"MAMBA_KEEP_CUDA_BUILD": 1}])
def test_a_bad_build_env_is_bad_input_naming_the_key(value: object):
    entry = {"title": "toy-ssm", "distributions": ["toy-ssm"], "install_distribution": "toy-ssm",
             "probe_modules": ["toy_ssm"], "devices": ["cuda"], "kind": "cuda-extension", "build_env": value}
    with pytest.raises(BadInput) as got:
        matrix.packages_from({"toy_ssm": entry}, Path("/etc/kc/packages.toml"))
    assert "[toy_ssm] build_env: must be a table of environment variables" in str(got.value)  # wording: renderer test


def test_the_target_arches_go_where_the_unconditional_gencode_list_is():
    """mamba-ssm 2.2.6.post3 to 2.3.1 open their list with sm_53..sm_72 under a condition nvcc 13 skips (setup.py
    lines 175-183); the target must replace the unconditional sm_75 that follows, or nvcc 13 builds no -gencode."""
    text = ('if True:\n'
            '        if bare_metal_version <= Version("12.9"):\n'
            '            cc_flag.append("-gencode")\n'
            '            cc_flag.append("arch=compute_53,code=sm_53")\n'
            '        cc_flag.append("-gencode")\n'
            '        cc_flag.append("arch=compute_75,code=sm_75")\n'
            '        if bare_metal_version >= Version("11.8"):\n'
            '            cc_flag.append("-gencode")\n'
            '            cc_flag.append("arch=compute_90,code=sm_90")\n')
    got = build.patch_gencode(text, ("9.0",))
    scope: dict = {"cc_flag": [], "Version": lambda v: tuple(int(x) for x in v.split(".")),
                   "bare_metal_version": (13, 0)}
    exec(compile(got.text, "setup.py", "exec"), scope)
    assert scope["cc_flag"] == ["-gencode", "arch=compute_90,code=sm_90"]
    assert got.kept == ("sm_90",) and got.removed == ("sm_53", "sm_75")
