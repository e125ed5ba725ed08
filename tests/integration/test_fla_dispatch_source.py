"""fla's dispatch read from the real fla-core wheels' source, and doctor's verdict on the rows of the H200
differential table that this CPU box can reproduce (`--arch 9.0`: doctor judges an H200 it does not have).

Integration lane: pip-installed sites (tests/envs.py) and `python -m kernelcheck` subprocesses. The rows that need a
GPU-less nvcc state (nvcc hidden, only pip's nvidia-cuda-nvcc) are in tests/unit/test_fla_dispatch.py as Environment
values: this box has /usr/local/cuda/bin/nvcc, which fla's has_usable_nvcc finds however PATH is set.
"""

from __future__ import annotations

import dataclasses

import pytest

from kernelcheck.core import matrix
from kernelcheck.integrations import fla_dispatch
from tests.envs import function, run_json, site

pytestmark = pytest.mark.integration

_COMPARED = ("dispatch", "guard", "bwd_tilelang", "tilelang_check", "tilelang_default", "flash_qla",
             "flash_qla_fwd_only", "kda_tilelang", "flash_kda")


@pytest.mark.parametrize("version", ["0.4.2", "0.5.0", "0.5.2", "0.6.0"])
def test_reading_the_real_wheel_gives_the_tables_row(version):
    root = site(f"fla-core=={version}")
    read = fla_dispatch.read_source(root, version)
    assert read.problems == ()
    table = fla_dispatch.from_table(version, m=matrix.load())
    assert {k: getattr(read, k) for k in _COMPARED} == {k: getattr(table, k) for k in _COMPARED}


def test_a_dispatch_layout_it_does_not_know_is_a_problem_not_a_crash(tmp_path):
    real = site("fla-core==0.6.0")
    fla = tmp_path / "fla"
    (fla / "ops/common").mkdir(parents=True)
    (fla / "backends.py").write_text("class SomethingElse: ...\n")  # a refactored registry
    (fla / "ops/common/chunk_o.py").write_text((real / "fla/ops/common/chunk_o.py").read_text())
    lay = fla_dispatch.read_source(tmp_path, "0.7.0")
    assert not lay.known and any("BackendRegistry" in p for p in lay.problems)
    assert dataclasses.replace(lay, problems=()).guard == ">=3.4.0,<3.7.1"


FLA = ("fla-core==0.6.0", "einops", "triton==3.6.0")


def _doctor(*sites, env=None):
    return run_json(["doctor", "--model", "qwen3.8-27b", "--mode", "train", "--arch", "9.0", "--no-hub"],
                    *sites, env=env)


def _ids(rep):
    return {f["id"] for f in rep["findings"] if f["severity"] == "broken"}


def _backward(rep):
    return next(o for o in rep["backends"]["ops"] if o["pass"] == "backward")


def test_differential_rows_tilelang_absent_switched_off_and_not_importable():
    fla, tilelang = site(*FLA), site("tilelang==0.1.15")  # tilelang without its apache-tvm-ffi: does not import
    code, rep = _doctor(fla)  # tilelang absent
    assert code == 4 and "fla-640-refuses" in _ids(rep)
    assert rep["backends"]["read_from"] == "source"
    assert (_backward(rep)["backend"], _backward(rep)["cause"]) == ("triton", "tilelang-absent")

    code, rep = _doctor(fla, env={"FLA_TILELANG": "0"})
    assert code == 4 and "fla-640-tilelang-off" in _ids(rep)
    assert _backward(rep)["cause"] == "tilelang-disabled"

    # fla-core 0.6.0 imports tilelang with fla.ops where it finds nvcc (this box has /usr/local/cuda/bin/nvcc):
    # `import fla.ops` fails, transformers binds the torch path: a silent fallback, not a crash
    code, rep = _doctor(fla, tilelang)
    assert code == 3, rep["findings"]
    assert function(rep, "chunk_gated_delta_rule")["status"] == "fallback"
    assert {"fla-import-fails", "tilelang-tvm-ffi-window"} <= {f["id"] for f in rep["findings"]}


def test_differential_row_fla_core_052_sends_the_backward_to_a_tilelang_that_does_not_import():
    fla, tilelang = site("fla-core==0.5.2", "einops", "triton==3.6.0"), site("tilelang==0.1.15")
    code, rep = _doctor(fla)
    assert code == 4 and "fla-640-refuses" in _ids(rep)
    assert rep["backends"]["fla"] == "0.5.2" and rep["backends"]["read_from"] == "source"
    code, rep = _doctor(fla, tilelang)  # 0.5.2 imports tilelang only inside the backward
    assert code == 4 and "tilelang-import-fails-in-backward" in _ids(rep)
    assert (_backward(rep)["backend"], _backward(rep)["cause"]) == ("tilelang", "tilelang-import-fails")


def test_the_probe_says_where_nvcc_comes_from(tmp_path, monkeypatch):
    """nvcc on PATH from a toolkit, pip's nvcc (found by its wheel or through CUDA_HOME), or none at all."""
    from kernelcheck.core import environment
    from tests.unit.test_fla_dispatch import _pip_nvcc_dist

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert environment.nvcc_probe(None) == (None, None, "none")
    _pip_nvcc_dist(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pip = str(tmp_path / "nvidia/cu13/bin/nvcc")
    assert environment.nvcc_probe(None) == ("13.0", pip, "pip")  # not on PATH: fla still finds it
    assert environment.nvcc_probe(str(tmp_path / "nvidia/cu13")) == ("13.0", pip, "pip")  # CUDA_HOME at it
    toolkit = tmp_path / "cuda/bin"
    toolkit.mkdir(parents=True)
    (toolkit / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n")
    (toolkit / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", str(toolkit))
    assert environment.nvcc_probe(None) == ("12.9", str(toolkit / "nvcc"), "toolkit")
