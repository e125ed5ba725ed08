"""The JIT probe's child: compile (and, with a GPU, run) one trivial kernel with one JIT, print one JSON line.

    python -m kernelcheck.doctor.jit_child JIT MODE ARCH NVCC [INCLUDE ...]

JIT: triton | tilelang | flash_qla; MODE: run (a GPU is visible: compile, launch, compare with torch) | compile (no
GPU: what can be checked without one; for TileLang, the nvcc it compiles with, on a trivial .cu that includes the
CUDA runtime header and CCCL's <cuda/std/...> headers, as TileLang's generated code does); ARCH: sm_90 ...; NVCC: the
nvcc TileLang uses ("-": none). Run by doctor/jitprobe.py in its own process with a time limit, so a JIT that hangs
or crashes the interpreter cannot take doctor down. Its answer: {"ok", "stage", "error", "seconds"}.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

_CU = """#include <cuda_runtime.h>
#include <cuda/std/type_traits>
#include <cuda/std/cstdint>
extern "C" __global__ void kc_probe(float* x) { x[threadIdx.x] += 1.0f; }
"""


NVCC_LIMIT_S = 120.0  # the trivial .cu compiles in seconds; a hanging nvcc is ended (its tree by the parent)


def _nvcc_compile(nvcc: str, arch: str, includes: list[str]) -> dict[str, object]:
    """nvcc alone on the trivial .cu, bounded in time and output (core/child.py); compiled means exit 0 *and* an
    object file written."""
    if nvcc in ("", "-"):
        return {"ok": False, "stage": "compile", "error": "no nvcc: TileLang's JIT has no compiler here"}
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from kernelcheck.core import child

    with tempfile.TemporaryDirectory(prefix="kc-jit-") as tmp:
        src, obj = os.path.join(tmp, "probe.cu"), os.path.join(tmp, "probe.o")
        with open(src, "w") as fh:
            fh.write(_CU)
        cmd = [nvcc, f"-arch={arch}", "-c", src, "-o", obj, *(f"-I{d}" for d in includes)]
        try:
            res = child.run(cmd, NVCC_LIMIT_S, own_group=False)
        except OSError as exc:
            return {"ok": False, "stage": "compile", "error": f"{type(exc).__name__}: {exc}"}
        wrote = os.path.isfile(obj) and os.path.getsize(obj) > 0
    if res.ended:
        why = (f"did not finish within {NVCC_LIMIT_S:g} s" if res.ended == "timeout"
               else f"wrote over {child.LIMIT >> 20} MiB of output")
        return {"ok": False, "stage": "compile", "error": f"{nvcc} {why}; it was ended"}
    if res.code != 0:
        return {"ok": False, "stage": "compile", "error": res.output.strip()[-2000:]}
    if not wrote:
        return {"ok": False, "stage": "compile", "error": f"{nvcc} exited 0 without writing the object file "
                "(not a working nvcc)"}
    return {"ok": True, "stage": "compile", "error": None}


def _triton(mode: str, arch: str) -> dict[str, object]:
    import torch
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[untyped-decorator]  # a JIT kernel: Triton/TileLang read its parameters
    def add_one(x_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # Triton's constexpr convention
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    if mode == "compile":
        from triton.backends.compiler import GPUTarget

        src = triton.compiler.ASTSource(fn=add_one, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                                        constexprs={"BLOCK": 128})
        triton.compile(src, target=GPUTarget("cuda", int(arch.removeprefix("sm_")), 32))
        return {"ok": True, "stage": "compile", "error": None}
    x = torch.zeros(1000, device="cuda")
    add_one[(8,)](x, 1000, BLOCK=128)
    torch.cuda.synchronize()
    ok = bool(torch.all(x == 1.0))
    return {"ok": ok, "stage": "run", "error": None if ok else "the kernel ran but its result is wrong"}


def _tilelang(mode: str, arch: str, nvcc: str, includes: list[str], qla: bool) -> dict[str, object]:
    if qla:
        import flash_qla  # noqa: F401 - FlashQLA's kernels are @tilelang.jit: its import, then TileLang's JIT
    if mode == "compile":
        import tilelang  # the import first: apache-tvm-ffi outside its window fails here

        return _nvcc_compile(nvcc, arch, includes)
    import tilelang
    import tilelang.language as T  # TileLang's own convention
    import torch

    try:  # the real JIT, with the CUDA home and nvcc it finds itself
        return _tilelang_run(tilelang, T, torch)
    except Exception as exc:  # noqa: BLE001 - the JIT's failure, or the probe kernel's own (this tilelang's API)
        alone = _nvcc_compile(nvcc, arch, includes)
        if not alone["ok"]:  # the compiler the JIT calls fails on its own: that is the failure
            return {**alone, "error": f"{type(exc).__name__}: {str(exc)[:300]} | nvcc alone: {alone['error']}"}
        # nvcc compiles the CUDA runtime and CCCL headers here: the probe kernel, not the toolchain, may be at fault
        return {"ok": False, "stage": "probe", "error": f"{type(exc).__name__}: {str(exc)[:400]}"}


def _tilelang_run(tilelang: Any, T: Any, torch: Any) -> dict[str, object]:  # TileLang's convention
    @tilelang.jit(out_idx=[1])  # type: ignore[untyped-decorator]  # a JIT kernel: Triton/TileLang read its parameters
    def add_one(n: int, block: int = 128) -> Any:
        @T.prim_func  # type: ignore[untyped-decorator]  # a JIT kernel: Triton/TileLang read its parameters
        def main(a: T.Tensor((n,), "float32"), b: T.Tensor((n,), "float32")) -> None:  # type: ignore[valid-type]
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    b[bx * block + i] = a[bx * block + i] + 1.0
        return main

    kernel = add_one(1024)
    a = torch.randn(1024, device="cuda")
    b = kernel(a)
    torch.cuda.synchronize()
    ok = bool(torch.allclose(b, a + 1.0))
    return {"ok": ok, "stage": "run", "error": None if ok else "the kernel ran but its result is wrong"}


def main(argv: list[str]) -> int:
    jit, mode, arch, nvcc, *includes = argv
    t0 = time.monotonic()
    try:
        if jit == "triton":
            out = _triton(mode, arch)
        else:
            out = _tilelang(mode, arch, nvcc, includes, qla=jit == "flash_qla")
    except ImportError as exc:
        out = {"ok": False, "stage": "import", "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 - the JIT's own error is the answer
        out = {"ok": False, "stage": mode, "error": f"{type(exc).__name__}: {str(exc)[-2000:]}"}
    out["seconds"] = round(time.monotonic() - t0, 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
