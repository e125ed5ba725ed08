"""A real compile of causal-conv1d 1.7.0's own sources (the PyPI sdist) against CUDA torch 2.14.1.

torch >= 2.14's headers refuse anything below C++20; the sdist's setup.py pins -std=c++17 for g++ and
nvcc. With the flags kernelcheck's patch writes, its host csrc/causal_conv1d.cpp and one kernel file
(csrc/causal_conv1d_update.cu, sm_90 only: one arch keeps CI time reasonable) compile; with upstream's
own -std=c++17 the host file fails on torch's #error. Slow (minutes on 2 cores): marked slow.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from kernelcheck.install import build
from tests.integration.test_install_artifacts import _real_sdist
from tests.kcfixtures import cuda_torch_venv, have_nvcc, site_packages

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH")]


def _flags(venv: Path) -> list[str]:
    torch = site_packages(venv) / "torch" / "include"
    py = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],  # noqa: E501
                        capture_output=True, text=True, check=True).stdout.strip()
    return [f"-I{torch}", f"-I{torch / 'torch' / 'csrc' / 'api' / 'include'}", f"-I{py}",
            "-D_GLIBCXX_USE_CXX11_ABI=1", "-DTORCH_EXTENSION_NAME=causal_conv1d_cuda", "-DTORCH_API_INCLUDE_EXTENSION_H"]  # noqa: E501


def test_causal_conv1d_sources_compile_against_torch_2_14_only_with_the_patched_std(tmp_path: Path):
    venv = cuda_torch_venv()
    with tarfile.open(_real_sdist()) as tf:
        tf.extractall(tmp_path, filter="data")
    src = tmp_path / "causal_conv1d-1.7.0"
    patched, changed = build.patch_std((src / "setup.py").read_text(), "2.14")
    assert changed and "-std=c++20" in patched
    from kernelcheck.core.environment import nvcc_version

    _, nvcc = nvcc_version(None)
    home = os.environ.get("CUDA_HOME") or ("/usr/local/cuda" if Path("/usr/local/cuda/include").is_dir() else "")
    cuda_inc = Path(home) / "include" if home else Path(nvcc or "nvcc").resolve().parent.parent / "include"
    flags = _flags(venv) + [f"-I{cuda_inc}", f"-I{src / 'csrc'}"]
    cpp = str(src / "csrc" / "causal_conv1d.cpp")
    old = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", *flags, cpp], capture_output=True, text=True)
    assert old.returncode != 0 and "C++20" in old.stderr, old.stderr[-1500:]  # wording: the compiler's own message
    new = subprocess.run(["g++", "-std=c++20", "-fPIC", "-O0", "-c", *flags, cpp, "-o", str(tmp_path / "host.o")],
                         capture_output=True, text=True)
    assert new.returncode == 0, new.stderr[-3000:]
    cu = subprocess.run(["nvcc", "-std=c++20", "-c", "-Xcompiler", "-fPIC", "-O1", "--expt-relaxed-constexpr",
                         "-gencode", "arch=compute_90,code=sm_90", *flags, str(src / "csrc" / "causal_conv1d_update.cu"),  # noqa: E501
                         "-o", str(tmp_path / "update.o")], capture_output=True, text=True)
    assert cu.returncode == 0, cu.stderr[-3000:]
    obj = (tmp_path / "update.o").read_bytes()
    from kernelcheck.install import wheels

    assert "sm_90" in wheels.so_arches(obj)  # the object carries sm_90 SASS, nothing else
