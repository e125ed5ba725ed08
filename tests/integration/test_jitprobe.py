"""The JIT probe with real toolchains (doctor/jitprobe.py running doctor/jit_child.py): the CUDA 13.0 toolkit's nvcc
on this machine, and pip's CUDA compiler pieces installed into test sites the way `pip install tilelang[nvcc]` or
torch's dependencies bring them. No GPU here, so the probe runs in compile mode: TileLang's nvcc compiles a trivial
.cu including the CUDA runtime and CCCL headers, and the run is unchecked (jit-run-unchecked).

`tilelang` itself is a stand-in module here (its 50 MB wheel needs a GPU to do anything); the compile under test is
the real nvcc's. Measured here, with nvcc 13.0.88 from pip: nvcc alone and nvcc + cccl miss cuda_runtime.h; + the
runtime misses crt/host_config.h; + crt misses nvvm's cicc; without cccl, cuda/std/...; all five compile."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.doctor import jitprobe
from tests.envs import site

pytestmark = pytest.mark.integration

CUDA = "13.0"
NVCC = "nvidia-cuda-nvcc==13.0.88"
CCCL = "nvidia-cuda-cccl==13.0.85"
RUNTIME = "nvidia-cuda-runtime==13.0.96"
CRT = "nvidia-cuda-crt==13.0.88"
NVVM = "nvidia-nvvm==13.0.88"


def _stand_in_tilelang(tmp: Path) -> Path:
    (tmp / "tilelang").mkdir(parents=True)
    (tmp / "tilelang" / "__init__.py").write_text("__version__ = '0.1.15'  # stand-in: the import only\n")
    return tmp


@pytest.fixture
def child_path(tmp_path: Path, monkeypatch) -> Path:
    """The probe's child sees the stand-in tilelang (PYTHONPATH) and a clean, writable kernelcheck home."""
    stand_in = _stand_in_tilelang(tmp_path / "stand-in")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(stand_in), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("KERNELCHECK_HOME", str(tmp_path / "home"))
    return stand_in


def _pip_toolchain(*reqs: str) -> jitprobe.Toolchain:
    cu = site(*reqs) / "nvidia" / "cu13"
    return jitprobe.toolchain({"CUDA_HOME": str(cu), "PATH": "", "HOME": os.environ.get("HOME", "/root")})


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs the CUDA toolkit's nvcc on PATH")
def test_the_toolkit_nvcc_compiles_and_the_pass_is_cached(child_path: Path) -> None:
    tc = jitprobe.toolchain(dict(os.environ))
    first = jitprobe.probe("tilelang", "compile", "sm_90", tc, m=matrix.load())
    assert first["ok"] is True and first["stage"] == "compile" and first["cached"] is None, first
    again = jitprobe.probe("tilelang", "compile", "sm_90", tc, m=matrix.load())
    assert again["ok"] is True and again["cached"]  # the same toolchain: not compiled again
    found = jitprobe.findings({"tilelang": ("chunk_gated_delta_rule",)}, {"tilelang": first}, tc, "sm_90")
    assert [f.id for f in found] == ["jit-run-unchecked"]


@pytest.mark.parametrize(("reqs", "missing"), [
    ((NVCC,), "nvidia-cuda-runtime"),
    ((NVCC, CCCL), "nvidia-cuda-runtime"),  # tilelang[nvcc]'s pair
    ((NVCC, CCCL, RUNTIME), "nvidia-cuda-crt"),
    ((NVCC, CCCL, RUNTIME, CRT), "nvidia-nvvm"),
    ((NVCC, RUNTIME, CRT, NVVM), "nvidia-cuda-cccl"),
], ids=["nvcc", "nvcc+cccl", "+runtime", "+crt", "no-cccl"])
def test_pips_nvcc_without_its_pieces_fails_to_compile_and_names_the_missing_one(
        child_path: Path, reqs: tuple[str, ...], missing: str) -> None:
    tc = _pip_toolchain(*reqs)
    got = jitprobe.probe("tilelang", "compile", "sm_90", tc, m=matrix.load())
    assert got["ok"] is False and got["cached"] is None, got
    assert jitprobe.missing_piece(got["error"]) == missing, got["error"]
    found = jitprobe.findings({"tilelang": ("chunk_gated_delta_rule",)}, {"tilelang": got}, tc, "sm_90")
    assert [(f.id, f.severity) for f in found] == [("jit-probe-failed", "broken")]
    assert missing in found[0].fix
    # a failure is never cached: the next probe compiles again
    assert jitprobe.probe("tilelang", "compile", "sm_90", tc, m=matrix.load())["cached"] is None


def test_pips_nvcc_with_all_its_pieces_compiles(child_path: Path) -> None:
    got = jitprobe.probe("tilelang", "compile", "sm_90", _pip_toolchain(NVCC, CCCL, RUNTIME, CRT, NVVM),
                         m=matrix.load())
    assert got["ok"] is True, got


def test_cuda_home_without_nvcc_and_a_missing_tilelang_fail(child_path: Path, tmp_path: Path, monkeypatch) -> None:
    empty = tmp_path / "cuda-empty"
    empty.mkdir()
    tc = jitprobe.toolchain({"CUDA_HOME": str(empty), "PATH": os.environ.get("PATH", "")})
    got = jitprobe.probe("tilelang", "compile", "sm_90", tc, m=matrix.load())
    assert (got["ok"], got["stage"]) == (False, "compile"), got
    monkeypatch.setenv("PYTHONPATH", os.environ["PYTHONPATH"].replace(str(child_path), str(tmp_path / "none")))
    gone = jitprobe.probe("flash_qla", "compile", "sm_90", jitprobe.toolchain(dict(os.environ)), m=matrix.load())
    assert (gone["ok"], gone["stage"]) == (False, "import"), gone


def test_a_probe_that_hangs_is_stopped_at_its_time_limit(child_path: Path, tmp_path: Path) -> None:
    slow = tmp_path / "slow" / "bin"
    slow.mkdir(parents=True)
    (slow / "nvcc").write_text("#!/bin/sh\nsleep 30\n")
    (slow / "nvcc").chmod(0o755)
    tc = jitprobe.toolchain({"CUDA_HOME": str(slow.parent), "PATH": ""})
    got = jitprobe.run_probe("tilelang", "compile", "sm_90", tc, timeout=3)
    assert (got["ok"], got["timed_out"]) == (False, True)


def test_doctor_jit_probe_compiles_with_the_real_triton_and_says_the_run_is_unchecked(tmp_path: Path) -> None:
    """pip's fla-core 0.6.0 with triton 3.6.0, judged for an H100/H200 (--arch 9.0) on this CPU box: the fla ops run
    on Triton, whose real compiler builds a trivial kernel for sm_90 here (ptxas from the triton wheel); no GPU, so
    the run is unchecked. Without --jit-probe nothing is probed."""
    from tests.envs import run_json

    fla = site("fla-core==0.6.0", "einops", "triton==3.6.0")
    args = ["doctor", "--model", "qwen3.8-27b", "--arch", "9.0", "--mode", "train"]
    env = {"KERNELCHECK_HOME": str(tmp_path / "home")}
    _, data = run_json([*args, "--jit-probe"], fla, env=env)
    got = {f["id"]: f for f in data["findings"] if f["id"].startswith("jit-")}
    assert set(got) == {"jit-run-unchecked"}, data["findings"]
    assert got["jit-run-unchecked"]["functions"] == ["chunk_gated_delta_rule"]
    assert list((tmp_path / "home" / "jit-proofs").glob("*.json"))  # the pass is cached
    _, plain = run_json(args, fla, env=env)
    assert not [f for f in plain["findings"] if f["id"].startswith("jit-")]
    # a Triton cache that cannot be created (a file where its folder would be) is a broken precondition, and the
    # real Triton's compile fails there too: never a READY
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _, bad = run_json([*args, "--jit-probe"], fla, env={**env, "TRITON_CACHE_DIR": str(blocker / "cache")})
    pre = [f for f in bad["findings"] if f["id"] in ("jit-precondition", "jit-probe-failed")]
    assert {f["id"] for f in pre} == {"jit-precondition", "jit-probe-failed"}, bad["findings"]
    assert bad["verdict"] == "broken"
