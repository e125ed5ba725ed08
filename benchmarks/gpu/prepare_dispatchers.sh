#!/usr/bin/env bash
# Fill DEST/part5 and DEST/part6 (default .carry/wh, git-ignored) with what benchmarks/gpu/gpu_dispatchers.sh needs
# beyond parts 1-4 (bash benchmarks/gpu/prepare_gpu_wheelhouse.sh; bash benchmarks/gpu/prepare_differential.sh), every wheel
# as PyPI publishes it for cp312 manylinux x86_64 (the GPU image: Python 3.12, no network):
#   part5 (~41 MiB): flash-qla 0.1.3 (FlashQLA: @tilelang.jit kernels, 131 KB), and pip's CUDA 13.0 compiler pieces:
#     nvidia-cuda-nvcc 13.0.88 (36 MiB), nvidia-cuda-cccl 13.0.85 (tilelang[nvcc] = nvcc + cccl),
#     nvidia-cuda-runtime 13.0.96 and nvidia-cuda-crt 13.0.88 (the headers pip's nvcc lacks);
#   part6 (~59 MiB): nvidia-nvvm 13.0.88 (cicc, which pip's nvcc also lacks). Measured on the CPU box: nvcc alone and
#     nvcc + cccl miss cuda_runtime.h, + runtime misses crt/host_config.h, + crt misses nvvm's cicc, all five compile.
# tilelang 0.1.15 itself (47 MiB) is part1. Sizes: pip download --no-deps, 2026-12-07.
# Usage (repo root, CPU machine):  bash benchmarks/gpu/prepare_dispatchers.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.carry/wh}
PY=${PYTHON:-python3}
mkdir -p "$DEST/part5" "$DEST/part6"
dl() {  # dl DIR SPEC...
  local dir=$1; shift
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
    --platform any -d "$dir" "$@"
}
dl "$DEST/part5" "flash-qla==0.1.3" "nvidia-cuda-nvcc==13.0.88" "nvidia-cuda-cccl==13.0.85" \
  "nvidia-cuda-runtime==13.0.96" "nvidia-cuda-crt==13.0.88"
dl "$DEST/part6" "nvidia-nvvm==13.0.88"
ls -l "$DEST/part5" "$DEST/part6"
du -b -s "$DEST/part5" "$DEST/part6" | awk '{printf "%s %.1f MiB (carry limit 64 MiB per call)\n", $2, $1/1048576}'
