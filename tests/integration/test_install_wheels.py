"""Wheel tags, the fatbin reader on real nvcc output, gencode patching, MAX_JOBS sizing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck.core import gpu
from kernelcheck.core.errors import BuildFailed
from kernelcheck.core.plan_step import RejectKind
from kernelcheck.install import build, wheels
from tests.kcfixtures import PY_TAG, causal_conv1d_wheel, extension_so, have_nvcc, tiny_sdist

needs_nvcc = pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH")
TARGET = wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", 13, True, ("9.0",))


@needs_nvcc
def test_fatbin_reader_reads_real_nvcc_output():
    assert wheels.so_arches(extension_so((90,))) == ("sm_90",)
    assert set(wheels.so_arches(extension_so((80, 90)))) == {"sm_80", "sm_90"}
    assert wheels.so_arches(extension_so((90,), ptx=True)) == ("compute_90",)
    assert wheels.so_arches(b"\x7fELF not really") == ()


def test_arch_serves_rules():
    assert gpu.arch_serves(("sm_80",), "8.6") == "sass"  # same major, lower minor runs
    assert gpu.arch_serves(("sm_80",), "9.0") is None  # SASS never crosses a major
    assert gpu.arch_serves(("compute_80",), "9.0") == "ptx-jit"
    assert gpu.arch_serves(("sm_90",), "8.0") is None


def test_local_version_tags():
    n = wheels.parse_wheel_name("causal_conv1d-1.7.0+cu13torch2.11cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    assert n and n.name == "causal-conv1d" and n.public_version == "1.7.0" and n.python_tag == "cp312"
    assert wheels.build_tag(n.local) == wheels.BuildTag(13, "2.11", True)
    assert wheels.build_tag("cu13torch2.14cxx11abitrue") == wheels.BuildTag(13, "2.14", True)  # setuptools lowercases
    assert wheels.parse_wheel_name("causal_conv1d-1.7.0.tar.gz") is None


@needs_nvcc
def test_match_accepts_the_right_wheel_and_says_why_each_other_is_rejected(tmp_path: Path):
    good = wheels.inspect_wheel(causal_conv1d_wheel(tmp_path / "good"))
    d = wheels.match(good, TARGET, extension="causal_conv1d_cuda")
    assert d.accepted, d.reason
    assert "sm_90" in d.reason and "torch 2.14" in d.reason  # wording: renderer test

    cases = [
        (RejectKind.TORCH_MINOR, causal_conv1d_wheel(tmp_path / "t", local="cu13torch2.13cxx11abiTRUE")),
        (RejectKind.CXX11ABI, causal_conv1d_wheel(tmp_path / "a", local="cu13torch2.14cxx11abiFALSE")),
        (RejectKind.CUDA_MAJOR, causal_conv1d_wheel(tmp_path / "c", local="cu12torch2.14cxx11abiTRUE")),
        (RejectKind.WHEEL_TAGS, causal_conv1d_wheel(tmp_path / "p", py="cp312" if PY_TAG != "cp312" else "cp311")),
        (RejectKind.WHEEL_TAGS, causal_conv1d_wheel(tmp_path / "l", plat="linux_aarch64")),
        (RejectKind.GPU_ARCH, causal_conv1d_wheel(tmp_path / "s", arches=(80,))),
        (RejectKind.NEEDS_TRIAL, causal_conv1d_wheel(tmp_path / "n", local="")),
    ]
    for kind, path in cases:  # each one's words: tests/unit/test_plan_wording.py
        d = wheels.match(wheels.inspect_wheel(path), TARGET, extension="causal_conv1d_cuda")
        assert not d.accepted and d.kind == kind, (kind, d.reason)

    # sha256 differs from what was recorded (sidecar / plan): rejected
    d = wheels.match(good, TARGET, expected_sha256="0" * 64)
    assert not d.accepted and d.kind == RejectKind.SHA256
    # a truncated (corrupt) file: rejected, never a crash
    bad = tmp_path / "corrupt" / Path(good.path).name
    bad.parent.mkdir()
    data = Path(good.path).read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    d = wheels.match(wheels.inspect_wheel(bad), TARGET)
    assert not d.accepted and d.kind == RejectKind.WHEEL_FILE
    # a CPU torch can load no CUDA extension
    cpu = wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", None, True, ("9.0",))
    assert wheels.match(good, cpu).kind == RejectKind.CPU_TORCH


def _gencode(setup_py: str) -> set[str]:
    """The GPU code a setup.py's -gencode flags compile for (`code=sm_90` -> sm_90)."""
    return set(re.findall(r"code=(sm_\d+)", setup_py))


def test_patch_gencode_keeps_only_target_arches(tmp_path: Path):
    import tarfile

    sd = tiny_sdist(tmp_path)
    with tarfile.open(sd) as tf:
        text = tf.extractfile("causal_conv1d-1.7.0/setup.py").read().decode()
    assert {"sm_75", "sm_80"} <= _gencode(text)
    res = build.patch_gencode(text, ("9.0",))
    assert res.kept == ("sm_90",) and set(res.removed) == {"sm_75", "sm_80"}
    assert _gencode(res.text) == {"sm_90"}
    assert res.text.count("arch=compute_90,code=sm_90") == 1
    compile(res.text, "setup.py", "exec")  # still valid Python (conditional blocks keep a body)
    two = build.patch_gencode(text, ("8.0", "10.0"))
    assert "sm_100" in _gencode(two.text) and "sm_90" not in _gencode(two.text)
    with pytest.raises(BuildFailed):
        build.patch_gencode("print('no gencode here')", ("9.0",))


def test_max_jobs_from_cores_and_memory():
    gib = 1 << 30
    assert build.max_jobs(16, 128 * gib) == 16
    assert build.max_jobs(16, 20 * gib) == 5  # memory-bound: 4 GiB a job
    assert build.max_jobs(2, 1 * gib) == 1
    assert build.max_jobs(2, None) >= 1


def test_upstream_setup_py_patch_of_the_real_sdist():
    """The real causal-conv1d 1.7.0 setup.py from its PyPI sdist (fetched once into the test cache)."""
    from tests.envs import CACHE

    src = Path(__file__).resolve().parents[2] / ".carry" / "causal_conv1d-1.7.0.tar.gz"
    if not src.exists():
        dest = CACHE / "sdists"
        src = dest / "causal_conv1d-1.7.0.tar.gz"
        if not src.exists():
            dest.mkdir(parents=True, exist_ok=True)
            # the sdist is only downloaded, never built: skip its build so no CUDA torch is needed
            res = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
                                  ":all:", "--no-build-isolation", "causal-conv1d==1.7.0", "-d", str(dest)],
                                 capture_output=True, text=True,
                                 env={**os.environ, "CAUSAL_CONV1D_SKIP_CUDA_BUILD": "TRUE"})
            assert res.returncode == 0, res.stderr[-2000:]
    import tarfile

    with tarfile.open(src) as tf:
        text = tf.extractfile("causal_conv1d-1.7.0/setup.py").read().decode()
    res = build.patch_gencode(text, ("9.0",))
    assert res.kept == ("sm_90",) and len(res.removed) == 8
    compile(res.text, "setup.py", "exec")
