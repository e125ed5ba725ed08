"""Environment values for in-process tests: the machines this CPU box is not (an H200 image, a B200, a CPU
build), described as the probe would describe them. One builder for every test that needs one; the
`h200_env` fixture (tests/conftest.py) is its default, the H200 image the GPU runs used."""

from __future__ import annotations

from typing import Any

from kernelcheck.core.environment import Environment, Gpu, PackageState, TorchInfo
from kernelcheck.report.sections import EnvironmentView, ModelRef


def make_env(cap: str | None = "9.0", *, torch: str = "2.11.0+cu130", cuda: str | None = "13.0",
             triton: str | None = "3.6.0", transformers: str = "5.17.0", fla: str | None = None,
             tilelang: bool = False, nvcc: str | None = "13.0", python: str = "3.12.3",
             python_tag: str = "cp312", gpu_source: str | None = None, nvcc_source: str | None = None,
             env_vars: dict[str, str] | None = None, unmet: tuple[str, ...] | None = (),
             present: dict[str, bool] | None = None, gpu_name: str = "NVIDIA H200",
             jit_nvcc: str | None = None) -> Environment:
    """An Environment: `cap` the GPU's capability (None: no GPU), `fla` an installed fla-core version, `nvcc_source`
    what the nvcc is (toolkit | pip | none; default: toolkit when `nvcc` is set), `env_vars` the FLA_* switches set,
    `unmet` the "dist:requirement" pairs the probe found unmet, `present` more import names found (flash_qla),
    `jit_nvcc` the nvcc TileLang's JIT uses where it differs (cuda-home-no-nvcc: CUDA_HOME without bin/nvcc)."""
    packages = {"fla": PackageState("fla", True, fla, "fla-core", True, None)} if fla else {}
    return Environment(
        python=python, python_tag=python_tag, platform="linux_x86_64",
        torch=TorchInfo(torch, cuda, True, None, cap is not None), triton=triton, transformers=transformers,
        kernels=None, gpus=(Gpu(gpu_name, cap),) if cap else (), driver="580.1", nvcc=nvcc,
        cuda_home="/usr/local/cuda", packages=packages, present={"tilelang": tilelang, **(present or {})},
        gpu_source=gpu_source if gpu_source is not None else ("override" if cap else "none"),
        nvcc_source=nvcc_source or ("toolkit" if nvcc else "none"), env_vars=dict(env_vars or {}),
        requirements_unmet=unmet, jit_nvcc_source=jit_nvcc)


def make_view(cap: str | None = "9.0", **kw: Any) -> EnvironmentView:
    """The environment a report carries for make_env(cap, **kw)."""
    return EnvironmentView.of(make_env(cap, **kw))


def model_ref(query: str = "qwen3.8-27b", id: str | None = "Qwen/Qwen3.8-27B", model_type: str = "qwen3_5",
              source: str = "shipped-config", family: str = "gated_deltanet",
              layer: str | None = "Qwen3_5GatedDeltaNet") -> ModelRef:
    """The model a report is about (default: Qwen3.8-27B from its shipped config, as doctor resolves it)."""
    return ModelRef(query, id, model_type, source, family, layer)
