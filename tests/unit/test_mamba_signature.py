"""matrix/signatures.toml's `mamba-ssm-torch-fallback`: a trace recorded with with_stack=True whose Python stack
shows transformers' torch Mamba-1 scan (the decorated `mamba_selective_scan` / `mamba_selective_state_update` of
5.15+, a Mamba mixer's `slow_forward` in 5.13-5.14) is the slow path; mamba-ssm's own functions, Mamba-2's torch
functions and lfm2's `slow_forward` are not. In-process, on profiler-shaped event lists (a real CPU trace of a tiny
Mamba: tests/integration/test_trace.py)."""

from __future__ import annotations

import pytest

from kernelcheck.core import matrix
from kernelcheck.trace import analysis as tr

ID = "mamba-ssm-torch-fallback"


def _events(*frames: str, kernels: tuple[str, ...] = ()) -> list[dict]:
    """One ProfilerStep with an aten op, the Python frames given, and (a GPU trace) the kernels given."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000,
           "args": {}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {}}]
    ev += [{"ph": "X", "cat": "python_function", "name": f, "pid": 1, "tid": 1, "ts": 20 + i, "dur": 50, "args": {}}
           for i, f in enumerate(frames)]
    for i, k in enumerate(kernels):
        ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100 + 20 * i,
                "dur": 4, "args": {"correlation": i + 1}},
               {"ph": "X", "cat": "kernel", "name": k, "pid": 0, "tid": 7, "ts": 110 + 20 * i, "dur": 5,
                "args": {"correlation": i + 1, "device": 0, "stream": 7}}]
    return ev


def _finding(events: list[dict]):
    return next((f for f in tr.analyze_events(events, m=matrix.load()).findings if f.id == ID), None)


@pytest.mark.parametrize("frame, shown", [
    ("transformers/models/mamba/modeling_mamba.py(174): mamba_selective_scan", "mamba_selective_scan"),
    ("transformers/models/zamba/modeling_zamba.py(290): mamba_selective_scan", "mamba_selective_scan"),
    ("transformers/models/falcon_mamba/modeling_falcon_mamba.py(143): mamba_selective_state_update",
     "mamba_selective_state_update"),
    ("transformers/models/jamba/modeling_jamba.py(512): slow_forward", "slow_forward"),  # 5.13-5.14
])
def test_the_torch_mamba1_scan_in_the_python_stack_is_the_signature(frame: str, shown: str) -> None:
    f = _finding(_events(frame))
    assert f is not None and f.severity == "info"  # a CPU-only trace: the only path there
    assert f.functions == ("selective_scan_fn", "selective_state_update")
    (m,) = [m for m in tr.analyze_events(_events(frame), m=matrix.load()).fallbacks if m.id == ID]
    assert m.by_python_stack and f"`{shown}`" in m.evidence and m.distribution == "mamba-ssm"


def test_on_a_gpu_trace_it_is_a_fallback_and_mamba_ssm_kernels_rule_it_out() -> None:
    frame = "transformers/models/mamba/modeling_mamba.py(174): mamba_selective_scan"
    slow = _finding(_events(frame, kernels=("void at::native::vectorized_elementwise_kernel<4>(int)",)))
    assert slow is not None and slow.severity == "fallback"
    fast = ("void selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<32, 4, 1, true, true, true>>(...)",)
    assert _finding(_events(frame, kernels=fast)) is None  # mamba-ssm's kernel ran in the step


@pytest.mark.parametrize("frame", [
    "mamba_ssm/ops/selective_scan_interface.py(88): selective_scan_fn",  # bound: mamba-ssm's own function
    "transformers/integrations/hub_kernels.py(1028): wrapped",  # the decorator's wrapper, either way
    "transformers/models/mamba2/modeling_mamba2.py(120): mamba2_selective_state_update",  # Mamba-2's torch path
    "transformers/models/lfm2/modeling_lfm2.py(400): slow_forward",  # a short conv's torch path
    "torch/nn/modules/module.py(1750): _slow_forward",
])
def test_other_frames_are_not_the_mamba1_torch_path(frame: str) -> None:
    assert _finding(_events(frame)) is None
