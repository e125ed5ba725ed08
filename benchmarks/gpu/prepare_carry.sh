#!/usr/bin/env bash
# Fill .carry/ (git-ignored) with what benchmarks/gpu/gpu_verify.sh installs on the GPU machine, which has no
# network: fla-core 0.6.0 and einops from PyPI, and the causal-conv1d 1.7.0 wheel built for that machine
# (torch 2.11.0+cu130, cp312, sm_90) from ../shared/device-wheels. Run on the CPU machine, repo root.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${SHARED:-../shared}
mkdir -p .carry
cp "$SHARED"/device-wheels/causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl .carry/
(cd "$SHARED/device-wheels" && sha256sum -c SHA256SUMS)
PY=${PYTHON:-python3}
# pure-Python wheels: the same file serves Python 3.12 on the GPU machine
"$PY" -m pip download --quiet --no-deps --only-binary=:all: fla-core==0.6.0 einops -d .carry
ls -l .carry
