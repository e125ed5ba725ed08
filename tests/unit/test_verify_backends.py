"""verify's evidence names fla's backend from the kernels that ran, and maps fla's and TileLang's exceptions to
their rule and fix. The kernels are the committed H200 traces (tests/data/gpu/: fla-core 0.6.0 + tilelang 0.1.15,
torch 2.11.0+cu130, triton 3.6.0); the exception texts are the ones the H200 runs raised."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from kernelcheck.core import matrix, rules
from kernelcheck.verify import evidence
from kernelcheck.verify.statuses import _runtime_error_fix

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"
FLA_640 = ("RuntimeError: Triton >= 3.4.0 and < 3.7.1 on Hopper GPUs produces incorrect results for gated "
           "chunk_bwd_dqkwg (see #640). Please upgrade Triton to >= 3.7.1 or install tilelang: `pip install tilelang`")
TILELANG_JIT = "RuntimeError: #if defined(_MSC_VER) && !defined(__clang__) && _MSC_VER < 1940"

SIG = matrix.load().signatures  # the shipped signatures.toml


def _kernels(name: str) -> list[str]:
    with gzip.open(GPU / name) as fh:
        data = json.loads(fh.read())
    return sorted({e["name"] for e in data["traceEvents"] if e.get("cat") == "kernel"})


def test_the_h200_train_step_ran_the_gdn_backward_on_tilelang_and_the_rest_on_triton():
    names = _kernels("step-fast.json.gz")
    assert "kernel_kernel" in names and "chunk_bwd_kernel_dqkwg" not in names  # TileLang took dqkwg
    assert evidence.backends_seen(names, sig=SIG) == ["tilelang", "triton"]
    assert "kernel_kernel" in evidence.fast_kernel_names("fla", names, sig=SIG)  # it counts as fla's fast path


def test_a_forward_only_run_shows_only_triton_and_flash_qla_names_are_told_apart():
    assert evidence.backends_seen(_kernels("gdn_fast.json.gz"), sig=SIG) == ["triton"]
    assert evidence.backends_seen(["tilelang_fused_chunk_gdr_bwd_kernel_kernel", "kernel_kernel"], sig=SIG) == \
        ["flash_qla", "tilelang"]
    assert evidence.backends_seen(["void at::native::elementwise_kernel<...>"], sig=SIG) == []


def test_the_640_runtime_error_maps_to_its_rule_and_fixes_not_to_reinstall():
    rid, fix = _runtime_error_fix(FLA_640, "fla-core", "qwen3.8-27b", matrix.load())
    assert rid == "fla-640-refuses"
    assert fix is not None and "--allow-change triton" in fix and "nvcc" in fix \
        and "reinstall" not in fix  # wording: renderer test


def test_tilelangs_failed_jit_maps_to_the_pip_nvcc_rule():
    assert rules.match_runtime_error(TILELANG_JIT, matrix.load()).id == "tilelang-jit-pip-nvcc"
    assert _runtime_error_fix("ValueError: other", "fla-core", "m", matrix.load()) == (None, None)
