"""GPU kernel attribution in verify's evidence, on a Chrome trace written the way torch's profiler writes
one on a CUDA machine. There is no GPU here, so the GPU half of this trace is constructed (the only
stand-in in this file): event categories, the `correlation` link between a launch call and its kernel, and
Triton's `cuLaunchKernelEx` driver launches follow docs/facts.md section 7 and traces recorded on the H200."""

from __future__ import annotations

from kernelcheck.core import matrix
from kernelcheck.verify import evidence


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def _trace() -> list[dict]:
    ev = [
        # chunk_gated_delta_rule on layer 0, prefill: two Triton kernels (driver launches), one aten op
        _x("user_annotation", "kernelcheck::chunk_gated_delta_rule::prefill::L0#0", 100, 100),
        _x("cpu_op", "aten::empty", 105, 2),
        _x("cuda_driver", "cuLaunchKernelEx", 110, 5, correlation=11),
        _x("cuda_driver", "cuLaunchKernelEx", 130, 5, correlation=12),
        # causal_conv1d_fn on layer 0: one CUDA-extension kernel (runtime launch)
        _x("user_annotation", "kernelcheck::causal_conv1d_fn::prefill::L0#1", 300, 50),
        _x("cpu_op", "causal_conv1d::fwd", 301, 40),
        _x("cuda_runtime", "cudaLaunchKernel", 310, 4, correlation=21),
        # outside every range: an MLP matmul
        _x("cpu_op", "aten::mm", 400, 10),
        _x("cuda_runtime", "cudaLaunchKernel", 402, 4, correlation=31),
        # backward of the chunk rule, on the autograd thread (tid 2)
        _x("user_annotation", "kernelcheck::chunk_gated_delta_rule::train::L0#2::backward", 500, 100, tid=2),
        _x("cuda_driver", "cuLaunchKernelEx", 510, 5, tid=2, correlation=41),
        # GPU side
        _x("kernel", "chunk_gated_delta_rule_fwd_kernel_h_blockdim64", 120, 30, tid=7, correlation=11),
        _x("kernel", "chunk_fwd_kernel_o", 150, 20, tid=7, correlation=12),
        _x("kernel", "void causal_conv1d_channellast_fwd_kernel<128, 4>(ConvParamsBase)", 320, 10, tid=7,
           correlation=21),
        _x("kernel", "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT", 410, 50, tid=7, correlation=31),
        _x("kernel", "chunk_bwd_kernel_dqkwg", 520, 40, tid=7, correlation=41),
    ]
    return ev


def test_kernels_are_attributed_to_the_call_that_launched_them() -> None:
    st = evidence.analyze("prefill", _trace(), m=matrix.load())
    by = {(r.function, r.backward): r for r in st.ranges}
    chunk = by[("chunk_gated_delta_rule", False)]
    assert chunk.layer == 0 and chunk.step == "prefill"
    assert chunk.kernels == 2 and chunk.cpu_ops == 1
    assert set(chunk.kernel_names) == {"chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "chunk_fwd_kernel_o"}
    assert chunk.gpu_us == 50
    conv = by[("causal_conv1d_fn", False)]
    assert conv.kernels == 1 and conv.cpu_ops == 1
    bwd = by[("chunk_gated_delta_rule", True)]
    assert bwd.kernels == 1 and bwd.step == "train" and list(bwd.kernel_names) == ["chunk_bwd_kernel_dqkwg"]
    # the matmul outside every range belongs to no function, but counts in the step
    assert st.kernels == 5
    assert not any("nvjet" in n for r in st.ranges for n in r.kernel_names)


def test_fast_kernel_names_come_from_the_shared_signatures() -> None:
    names = ["chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "chunk_fwd_kernel_o", "elementwise_kernel"]
    assert evidence.fast_kernel_names("fla", names, sig=matrix.load().signatures) == names[:2]
    conv = ["void causal_conv1d_channellast_fwd_kernel<128, 4>(ConvParamsBase)"]
    assert evidence.fast_kernel_names("causal_conv1d", conv, sig=matrix.load().signatures) == conv
    assert evidence.fast_kernel_names("fla", conv, sig=matrix.load().signatures) == []


def test_the_launch_line_of_a_gpu_step_carries_the_trace_analysis() -> None:
    st = evidence.analyze("prefill", _trace(), m=matrix.load())
    gpu = evidence.launch_line(st, "cuda:0")
    assert (gpu.step, gpu.on_gpu, gpu.kernels, gpu.launch_bound) == ("prefill", True, 5, None)  # not launch-bound
    assert gpu.busy_fraction is not None and gpu.busy_fraction == st.stats.busy_fraction
    assert not evidence.launch_line(st, "cpu").on_gpu
