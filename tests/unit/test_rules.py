"""The breakage rules of matrix/breakages.toml against environments as the probe would describe them.

The probe's output is plain data (an Environment value); these tests describe machines we do not have
here (an H200, a B200) as that data. The same rules run for real on the H200 (see README, verified.toml).
"""

from __future__ import annotations

import functools
from dataclasses import replace

from kernelcheck.core import matrix, requirements, rules
from kernelcheck.core.environment import Environment
from kernelcheck.integrations import fla_dispatch
from tests.environments import make_env


def env(cap: str | None, triton: str | None = "3.6.0", fla: str | None = "0.6.0", tilelang: bool = False,
        transformers: str = "5.24.0") -> Environment:
    return make_env(cap, triton=triton, fla=fla, tilelang=tilelang, transformers=transformers, gpu_source="none")


def hits(e: Environment, mode: str = "train", bound=("fla",), nvcc=None) -> dict[str, rules.RuleHit]:
    f = rules.Facts(env=e, mode=mode, bound=frozenset(bound), built_nvcc=nvcc or {}, model="qwen3.8-27b",
                    fla_dispatch=functools.partial(fla_dispatch.backends, m=matrix.load()))
    return {h.rule.id: h for h in rules.evaluate(f, matrix.load())}


def test_fla_640_on_h200_with_triton_36_in_train_mode():
    h = hits(env("9.0"))
    assert set(h) == {"fla-640-refuses"}
    assert h["fla-640-refuses"].certain
    # the one check that a rule's message is filled from the facts (its {triton}); other tests read ids
    assert "triton 3.6.0" in h["fla-640-refuses"].message \
        and "tilelang" in h["fla-640-refuses"].fix  # wording: renderer test


def test_the_stock_h200_image_hits_fla_640_once_fla_core_is_installed(h200_env):
    # the H200 image (torch 2.11 + CUDA 13, triton 3.6, no tilelang) that install proves on: no fla, no rule
    assert hits(h200_env) == {}
    with_fla = replace(h200_env, packages=make_env(fla="0.6.0").packages)
    assert set(hits(with_fla)) == {"fla-640-refuses"}


def test_fla_640_not_in_infer_not_with_tilelang_not_with_fixed_triton_not_on_ampere():
    assert hits(env("9.0"), mode="infer") == {}
    assert hits(env("9.0", tilelang=True)) == {}
    assert hits(env("9.0", triton="3.7.1")) == {}
    assert hits(env("8.0")) == {}
    assert hits(env("9.0"), bound=()) == {}  # fla not bound: its kernel never runs


def test_fla_640_old_fla_gives_silent_wrong_gradients():
    assert set(hits(env("9.0", fla="0.4.2"))) == {"fla-640-wrong-grads"}
    assert set(hits(env("9.0", fla="0.5.1", triton="3.8.0"))) == {"fla-640-refuses-any-triton"}


def test_blackwell_with_old_triton():
    assert "fla-blackwell-old-triton" in hits(env("10.0", triton="3.7.1"), mode="infer")
    assert hits(env("10.0", triton="3.8.0"), mode="infer") == {}


def test_sm103_causal_conv1d_needs_the_building_nvcc():
    h = hits(env("10.3", triton="3.8.0"), bound=("causal_conv1d",))
    assert not h["causal-conv1d-sm103-nvcc13"].certain  # unknown compiler: reported as "may apply"
    h = hits(env("10.3", triton="3.8.0"), bound=("causal_conv1d",), nvcc={"causal_conv1d": "13.0"})
    assert h["causal-conv1d-sm103-nvcc13"].certain
    assert hits(env("10.3", triton="3.8.0"), bound=("causal_conv1d",), nvcc={"causal_conv1d": "12.9"}) == {}


def test_fla_on_cpu_only_machine_by_transformers_version():
    assert "fla-cpu-crash" in hits(env(None), mode="infer")
    assert hits(env(None, transformers="5.25.0"), mode="infer") == {}
    assert hits(env(None, transformers="5.14.1"), mode="infer") == {}


def test_version_parsing_ignores_local_tags():
    assert rules.version_in("2.11.0+cu130", ">=2.11,<2.12")
    assert not rules.version_in(None, ">=1")
    assert not rules.version_in("garbage", ">=1")


def _dist(root, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    d = root / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
                                + "".join(f"Requires-Dist: {r}\n" for r in requires))


def test_tilelang_tvm_ffi_window_is_read_from_tilelangs_own_requirements(tmp_path, monkeypatch):
    # tilelang 0.1.15's own Requires-Dist, as published; the installed apache-tvm-ffi varies
    _dist(tmp_path, "tilelang", "0.1.15", ("apache-tvm-ffi<0.1.13,>=0.1.11", "z3-solver>=4.13"))
    _dist(tmp_path, "apache-tvm-ffi", "0.1.14")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert requirements.requirement_unmet("tilelang", "apache-tvm-ffi") is True
    h = hits(replace(env("9.0"), requirements_unmet=requirements.requirements_unmet(matrix.load())))  # the probe's
    assert "tilelang-tvm-ffi-window" in h and h["tilelang-tvm-ffi-window"].rule.severity == "fallback"
    assert "mamba/issues/986" in h["tilelang-tvm-ffi-window"].rule.reference
    assert h["tilelang-tvm-ffi-window"].certain


def test_tilelang_with_a_tvm_ffi_inside_its_window_or_no_tilelang_is_fine(tmp_path, monkeypatch):
    _dist(tmp_path, "tilelang", "0.1.15", ("apache-tvm-ffi<0.1.13,>=0.1.11",))
    _dist(tmp_path, "apache-tvm-ffi", "0.1.12")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert requirements.requirement_unmet("tilelang", "apache-tvm-ffi") is False
    assert requirements.requirement_unmet("not-installed-dist", "apache-tvm-ffi") is False
    assert "tilelang-tvm-ffi-window" not in hits(replace(env("9.0"),
                                                         requirements_unmet=requirements.requirements_unmet(matrix.load())))


def _mamba_facts(built: bool | None, used: tuple[str, ...], bound=("mamba_ssm",)) -> rules.Facts:
    """mamba-ssm 2.3.2 installed and importing; `built`: whether the probe found selective_scan_cuda (None: the
    probe did not look it up)."""
    from kernelcheck.core.environment import PackageState

    e = make_env("9.0", transformers="5.24.0", present={} if built is None else {"selective_scan_cuda": built})
    e = replace(e, packages={"mamba_ssm": PackageState("mamba_ssm", True, "2.3.2", "mamba-ssm", True, None)})
    return rules.Facts(env=e, mode="infer", bound=frozenset(bound), model="mamba", functions=used)


MAMBA1 = ("selective_scan_fn", "mamba_inner_fn", "selective_state_update", "causal_conv1d_fn")
MAMBA2 = ("mamba_chunk_scan_combined", "mamba_split_conv1d_scan_combined", "selective_state_update")


def test_mamba_977_a_mamba_ssm_without_selective_scan_cuda_breaks_mamba1_only():
    def ids(f: rules.Facts) -> dict[str, rules.RuleHit]:
        return {h.rule.id: h for h in rules.evaluate(f, matrix.load())}

    hit = ids(_mamba_facts(False, MAMBA1))["mamba-selective-scan-cuda-missing"]
    assert hit.certain and hit.rule.severity == "broken"
    assert set(hit.rule.functions) == {"selective_scan_fn", "mamba_inner_fn"}
    assert "MAMBA_KEEP_CUDA_BUILD=TRUE" in hit.fix  # (a message filled from the facts: the fla-640 test above)
    assert "https://github.com/state-spaces/mamba/issues/977" in hit.rule.reference
    assert "mamba-selective-scan-cuda-missing" not in ids(_mamba_facts(True, MAMBA1))  # the extension is there
    assert "mamba-selective-scan-cuda-missing" not in ids(_mamba_facts(False, MAMBA2))  # Mamba-2: Triton only
    assert "mamba-selective-scan-cuda-missing" not in ids(_mamba_facts(False, MAMBA1, bound=()))  # torch path
    # undecided: the probe did not look the extension up, or the caller named no functions (install's planner)
    assert not ids(_mamba_facts(None, MAMBA1))["mamba-selective-scan-cuda-missing"].certain
    assert not ids(_mamba_facts(False, ()))["mamba-selective-scan-cuda-missing"].certain



def _released_mamba_ssm_without_its_extension(root) -> None:
    """The import chain of mamba-ssm's PyPI sdists (2.2.2 to 2.3.2.post1): mamba_ssm/__init__.py line 3 imports
    ops/selective_scan_interface.py, whose line 20 is `import selective_scan_cuda`; installed without the extension
    (MAMBA_SKIP_CUDA_BUILD=TRUE). The dist-info gives the version the probe reads."""
    pkg = root / "mamba_ssm"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "2.3.2.post1"\n\n'
                                     "from mamba_ssm.ops.selective_scan_interface import selective_scan_fn, "
                                     "mamba_inner_fn\n")
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "ops" / "selective_scan_interface.py").write_text("import selective_scan_cuda\n")
    info = root / "mamba_ssm-2.3.2.post1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mamba-ssm\nVersion: 2.3.2.post1\n")


def test_an_old_mamba_ssm_without_selective_scan_cuda_is_named_by_its_import_error(tmp_path, monkeypatch):
    """The probe's own text of the real failure (Python's ModuleNotFoundError for `import selective_scan_cuda`)
    matches the [[import_error]] rule, and doctor's finding and the function's fix come from it."""
    import sys

    from kernelcheck.core import environment
    from kernelcheck.doctor.run import environment_findings

    _released_mamba_ssm_without_its_extension(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        st = environment.probe_package(matrix.load().packages["mamba_ssm"])
    finally:  # the failed import leaves mamba_ssm.ops behind
        for name in [n for n in sys.modules if n == "mamba_ssm" or n.startswith("mamba_ssm.")]:
            monkeypatch.delitem(sys.modules, name)
    assert (st.installed, st.imports, st.version) == (True, False, "2.3.2.post1")
    assert st.error == "ModuleNotFoundError: No module named 'selective_scan_cuda'"
    rule = rules.match_import_error(st.error, matrix.load())
    assert rule is not None and rule.id == "mamba-selective-scan-cuda-import"
    assert "mamba-ssm 2.3.2.post1 sdist" in rule.reference
    e = replace(make_env("9.0", transformers="5.24.0"), packages={"mamba_ssm": st})
    (f,) = [f for f in environment_findings(e, matrix.load()) if f.id == "mamba-selective-scan-cuda-import"]
    assert f.severity == "warning" and f.fix is not None and "MAMBA_KEEP_CUDA_BUILD=TRUE" in f.fix
    # another missing module is not this rule
    assert rules.match_import_error("ModuleNotFoundError: No module named 'causal_conv1d_cuda'",
                                    matrix.load()) is None
