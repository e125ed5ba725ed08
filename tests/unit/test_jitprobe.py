"""The JIT proof's decisions (doctor/jitprobe.py) with explicit values: which JITs the chosen implementation uses,
the runtime preconditions a Toolchain value breaks, and the findings for given probe results. The probe itself (a
child process with real nvcc toolchains) is tests/integration/test_jitprobe.py."""

from __future__ import annotations

from pathlib import Path

from kernelcheck.core import matrix
from kernelcheck.core.status import FunctionStatus, Severity
from kernelcheck.doctor import jitprobe
from kernelcheck.integrations.fla_dispatch import OpBackend
from kernelcheck.report.model import Report
from kernelcheck.report.sections import BackendsSection, EnvironmentView
from tests.environments import make_env

FN = "chunk_gated_delta_rule"


def _report(*backends: str, cap: str | None = "9.0", gpu_source: str = "torch") -> Report:
    ops = tuple(OpBackend(FN, phase, b, "default", "ok", "r") for phase, b in zip(("forward", "backward"), backends,
                                                                                  strict=False))
    view = EnvironmentView.of(make_env(cap, gpu_source=gpu_source))
    rep = Report("doctor", view, None, "train", [FunctionStatus(FN, "fla-core", "fast", "fla.ops.x")])
    rep.backends = BackendsSection("0.6.0", "source", "ref", "13.0", "/usr/local/cuda/bin/nvcc", "toolkit", {}, ops)
    return rep


def _tc(**kw) -> jitprobe.Toolchain:
    base = dict(cuda_home="/usr/local/cuda", cuda_home_from="PATH", nvcc="/usr/local/cuda/bin/nvcc",
                includes=("/usr/local/cuda/include",), cc="/usr/bin/cc",
                caches={"triton": (("TRITON_CACHE_DIR", "/home/u/.triton/cache"),),
                        "tilelang": (("TILELANG_CACHE_DIR", "/home/u/.tilelang/cache"),),
                        "flash_qla": (("TILELANG_CACHE_DIR", "/home/u/.tilelang/cache"),)},
                visible_devices=None, device_nodes=1)
    return jitprobe.Toolchain(**{**base, **kw})


def test_the_jits_are_those_of_the_backends_that_run() -> None:
    assert jitprobe.wanted(_report("triton", "tilelang")) == {"triton": (FN,), "tilelang": (FN,)}
    assert jitprobe.wanted(_report("flash_qla", "flash_qla")) == {"flash_qla": (FN,)}
    rep = _report()
    rep.backends = None
    assert jitprobe.wanted(rep) == {}  # no fla op runs on a GPU here: nothing to probe


def test_each_broken_precondition_is_a_finding_with_its_fix() -> None:
    jits = {"triton": (FN,), "tilelang": (FN,)}
    assert jitprobe.preconditions(jits, _tc(), {}, writable=lambda f: True) == []
    unwritable = jitprobe.preconditions(jits, _tc(), {}, writable=lambda f: "triton" not in f)
    assert [(f.id, f.severity, f.functions) for f in unwritable] == [("jit-precondition", Severity.BROKEN, (FN,))]
    assert unwritable[0].fix.startswith("export TRITON_CACHE_DIR=")
    no_cc = jitprobe.preconditions(jits, _tc(cc=None), {}, writable=lambda f: True)
    assert [(f.id, f.severity, f.functions) for f in no_cc] == [("jit-precondition", Severity.BROKEN, (FN,))]
    hidden = jitprobe.preconditions(jits, _tc(visible_devices=""), {}, writable=lambda f: True)
    assert len(hidden) == 1 and hidden[0].severity == Severity.BROKEN
    assert jitprobe.preconditions(jits, _tc(visible_devices="", device_nodes=0), {}, writable=lambda f: True) == []
    interp = jitprobe.preconditions(jits, _tc(), {"TRITON_INTERPRET": "1"}, writable=lambda f: True)
    assert [f.severity for f in interp] == [Severity.FALLBACK]


def test_writable_follows_the_nearest_existing_folder(tmp_path: Path) -> None:
    assert jitprobe._writable(str(tmp_path / "a" / "b"))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        import os

        assert os.geteuid() == 0 or not jitprobe._writable(str(ro / "cache"))
    finally:
        ro.chmod(0o700)


def test_the_toolchain_takes_cuda_home_as_given_and_names_its_nvcc(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    tc = jitprobe.toolchain({"CUDA_HOME": str(tmp_path), "PATH": "", "HOME": "/home/u"})
    assert (tc.cuda_home, tc.cuda_home_from, tc.nvcc) == (str(tmp_path), "CUDA_HOME", str(tmp_path / "bin" / "nvcc"))
    assert tc.includes == (str(tmp_path / "include"),)
    assert tc.caches["triton"] == (("TRITON_CACHE_DIR", "/home/u/.triton/cache"),)
    assert jitprobe.toolchain({"TRITON_CACHE_DIR": "/x", "PATH": ""}).caches["triton"] == (("TRITON_CACHE_DIR", "/x"),)


def test_missing_pieces_of_pips_compiler_are_named_from_the_error() -> None:
    assert jitprobe.missing_piece("<command-line>: fatal error: cuda_runtime.h: No such file or directory") == \
        "nvidia-cuda-runtime"
    assert jitprobe.missing_piece("cuda_runtime.h:82:10: fatal error: crt/host_config.h: No such file") == \
        "nvidia-cuda-crt"
    assert jitprobe.missing_piece("sh: 1: .../nvvm/bin/cicc: not found") == "nvidia-nvvm"
    assert jitprobe.missing_piece("fatal error: cuda/std/type_traits: No such file or directory") == "nvidia-cuda-cccl"
    assert jitprobe.missing_piece("something else") is None


def test_findings_fail_pass_and_say_when_only_the_compile_was_checked() -> None:
    jits = {"triton": (FN,), "tilelang": (FN,)}
    res = {"triton": {"ok": True, "stage": "run", "error": None, "seconds": 1.0},
           "tilelang": {"ok": False, "stage": "compile", "error": "fatal error: cuda_runtime.h: No such file"}}
    got = {f.id: f for f in jitprobe.findings(jits, res, _tc(), "sm_90")}
    assert got["jit-probe-failed"].severity == Severity.BROKEN
    assert got["jit-probe-failed"].fix == jitprobe._fix("tilelang", res["tilelang"]["error"])  # names the piece
    assert got["jit-probe-passed"].severity == Severity.INFO
    compile_only = jitprobe.findings({"tilelang": (FN,)}, {"tilelang": {"ok": True, "stage": "compile"}}, _tc(),
                                     "sm_90")
    assert [(f.id, f.severity) for f in compile_only] == [("jit-run-unchecked", Severity.WARNING)]


def test_attach_breaks_the_functions_of_a_failing_jit_and_never_says_ready(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("KERNELCHECK_HOME", str(tmp_path))
    seen = []

    def fake(jit, mode, arch, tc, timeout=0):
        seen.append((jit, mode, arch))
        return {"ok": jit == "triton", "stage": mode, "error": None if jit == "triton" else "no nvcc", "seconds": 0.1}

    monkeypatch.setattr(jitprobe, "run_probe", fake)
    rep = _report("triton", "tilelang")
    jitprobe.attach(rep, m=matrix.load())
    assert sorted(seen) == [("tilelang", "run", "sm_90"), ("triton", "run", "sm_90")]
    assert rep.functions[0].status == "broken" and rep.verdict == "broken"
    # the pass was cached under the toolchain's key; the failure was not, so it is probed again
    seen.clear()
    jitprobe.attach(_report("triton", "tilelang"), m=matrix.load())
    assert seen == [("tilelang", "run", "sm_90")]
    # --arch (a GPU that is not here): compile only
    seen.clear()
    jitprobe.attach(_report("triton", gpu_source="override"), use_cache=False, m=matrix.load())
    assert seen == [("triton", "compile", "sm_90")]


def test_a_probe_kernel_this_jit_cannot_express_is_unchecked_not_broken() -> None:
    res = {"tilelang": {"ok": False, "stage": "probe", "error": "TypeError: Kernel() got an unexpected keyword"}}
    got = jitprobe.findings({"tilelang": (FN,)}, res, _tc(), "sm_90")
    assert [(f.id, f.severity) for f in got] == [("jit-run-unchecked", Severity.WARNING)]
