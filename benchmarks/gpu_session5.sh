#!/usr/bin/env bash
# One device call for #13 (verify --step on the H200): install the train-mode kernels into /tmp/site with
# kernelcheck itself (wheelhouse already in /tmp/kcwh, see benchmarks/gpu_install_proof.sh for the carry calls),
# then `verify --step` (4 layers, cold Triton cache) with its whole-step traces. step8 is a second call:
#   OUT=... bash benchmarks/gpu_step.sh step8     (TRITON_CACHE_DIR=$HOME/.triton/cache, warm)
# Results: $FINAL_OUT/session5.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
RES=/tmp/res5
mkdir -p "$RES/install"
export KERNELCHECK_OFFLINE=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
PYTHONPATH=$PWD python3 -m kernelcheck install --model qwen3.8-27b --mode train --wheelhouse /tmp/kcwh --offline \
  --target /tmp/site > "$RES/install/install.txt" 2>&1
echo "install exit $? in $(( $(date +%s) - t0 )) s" | tee "$RES/install/install.exit"
tail -15 "$RES/install/install.txt"
export TRITON_CACHE_DIR=$HOME/.triton/cache
OUT=$RES/step STEP_TIMEOUT=${STEP_TIMEOUT:-420} bash benchmarks/gpu_step.sh step > "$RES/step.log" 2>&1
tail -60 "$RES/step.log"
echo "== done: ${SECONDS} s"
tar czf "${FINAL_OUT:-/tmp}/session5.tgz" -C "$RES" .
