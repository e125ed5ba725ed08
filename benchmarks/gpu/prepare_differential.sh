#!/usr/bin/env bash
# Fill DEST/part4 (default .carry/wh/part4, git-ignored) with what benchmarks/gpu/gpu_differential.sh needs beyond
# prepare_gpu_wheelhouse.sh's parts 1-3, every wheel as PyPI publishes it for cp312 manylinux x86_64 (the H200
# image, Python 3.12, no network):
#   the 5.25 stack: transformers 5.25.0, kernels 0.19.1 (transformers 5.25 requires >=0.19.1,<0.20) and what the
#     image lacks of their requirements: huggingface_hub 2.x (>=2.4,<3), tomlkit, hf-xet, httpx2 / httpcore2 and
#     theirs, click >= 8.4.2 (the image's tokenizers, safetensors, regex serve with --no-deps);
#   the perturbations, in part4/pert: apache-tvm-ffi 0.1.13 (outside tilelang 0.1.15's <0.1.13) and fla-core 0.5.2.
# Usage (repo root, CPU machine):  bash benchmarks/gpu/prepare_differential.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.carry/wh}/part4
PY=${PYTHON:-python3}
mkdir -p "$DEST/pert"
dl() {  # dl DIR SPEC...
  local dir=$1; shift
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d "$dir" "$@"
}
dl "$DEST" "transformers==5.25.0" "kernels==0.19.1" "huggingface_hub>=2.4,<3" "tomlkit>=0.13.3" "hf-xet>=1.6,<2" \
  "httpx2>=2,<3" "click>=8.4.2,<9"
# httpx2's and httpcore2's requirements, as their METADATA names them (outside emscripten, no extras)
dl "$DEST" "anyio>=4.10" "httpcore2==$(ls "$DEST"/httpx2-*.whl | sed 's/.*httpx2-\([^-]*\)-.*/\1/')" "idna>=3.18" \
  "truststore>=0.10"
dl "$DEST" $(unzip -p "$DEST"/httpcore2-*.whl '*.dist-info/METADATA' | grep '^Requires-Dist' | grep -v extra \
  | sed 's/^Requires-Dist: //; s/;.*//; s/ //g')
dl "$DEST/pert" "apache-tvm-ffi==0.1.13" "fla-core==0.5.2"
ls -l "$DEST" "$DEST/pert"
du -b -s "$DEST" | awk '{printf "%s %.1f MiB (carry limit 64 MiB per call)\n", $2, $1/1048576}'
