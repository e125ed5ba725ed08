#!/usr/bin/env bash
# Fill a wheelhouse for benchmarks/gpu/gpu_install_proof.sh (the H200 stock image: Python 3.12, no network).
# Every wheel exactly as PyPI publishes it, for cp312 manylinux x86_64, no dependency resolution here
# (kernelcheck resolves the fix's window through pip on the GPU machine, from this folder):
#   fla-core 0.6.0, einops, tilelang 0.1.15 and what its METADATA requires: apache-tvm-ffi (<0.1.13,>=0.1.11),
#   torch-c-dlpack-ext, z3-solver (<4.15.5,>=4.13.0), cloudpickle, ml-dtypes, numpy, psutil, tqdm,
#   typing-extensions; plus the causal-conv1d 1.7.0 wheel built on the H200 (../shared/device-wheels).
# Usage (repo root, CPU machine):  bash benchmarks/gpu/prepare_gpu_wheelhouse.sh [DEST]   (default .carry/wh)
# The carry limit is 64 MiB per run call and the total is ~120 MiB, so the files are split into three
# folders that each fit one call: DEST/part1 tilelang (47 MiB), DEST/part2 causal-conv1d + z3-solver
# (53 MiB), DEST/part3 the rest (~21 MiB); see the size lines printed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.carry/wh}
SHARED=${SHARED:-$( [ -d ../shared ] && echo ../shared || echo /work/shared )}
PY=${PYTHON:-python3}
mkdir -p "$DEST/part1" "$DEST/part2" "$DEST/part3"
dl() {  # dl DIR SPEC...
  local dir=$1; shift
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d "$dir" "$@"
}
dl "$DEST/part1" "tilelang==0.1.15"
dl "$DEST/part2" "z3-solver>=4.13.0,<4.15.5"
dl "$DEST/part3" "fla-core==0.6.0" einops "apache-tvm-ffi>=0.1.11,<0.1.13" torch-c-dlpack-ext cloudpickle ml-dtypes "numpy>=1.23.5" psutil "tqdm>=4.62.3" "typing-extensions>=4.10.0"
cp "$SHARED"/device-wheels/causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl "$DEST/part2/"
(cd "$SHARED/device-wheels" && sha256sum -c SHA256SUMS)
ls -l "$DEST"/part1 "$DEST"/part2 "$DEST"/part3
du -b -s "$DEST/part1" "$DEST/part2" "$DEST/part3" | awk '{printf "%s %.1f MiB\n", $2, $1/1048576}'
du -b -s "$DEST" | awk '{printf "total %.1f MiB (carry limit 64 MiB per call)\n", $1/1048576}'
