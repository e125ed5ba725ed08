#!/usr/bin/env bash
# One device call (H200) for the doctor's speed and the install's speed: install the train-mode kernels into /tmp/site with kernelcheck
# (wheelhouse already in /tmp/kcwh: see benchmarks/gpu/gpu_install_proof.sh for the two carry calls), then
# benchmarks/doctor_speed.py with that site (doctor cold / warm vs transformers env, side by side), then
# `verify --step` (4 layers, cold Triton cache) with its whole-step traces. step8 is a second call:
#   OUT=/tmp/res6/step TRITON_CACHE_DIR=$HOME/.triton/cache bash benchmarks/gpu/gpu_step.sh step8
# Results: $FINAL_OUT/install-speed-step.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
RES=/tmp/res6
mkdir -p "$RES/install"
export KERNELCHECK_OFFLINE=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
PYTHONPATH=$PWD python3 -m kernelcheck install --model qwen3.8-27b --mode train --wheelhouse /tmp/kcwh --offline \
  --target /tmp/site > "$RES/install/install.txt" 2>&1
echo "install exit $? in $(( $(date +%s) - t0 )) s" | tee "$RES/install/install.exit"
tail -3 "$RES/install/install.txt"
python3 benchmarks/doctor_speed.py --runs ${SPEED_RUNS:-3} --site /tmp/site --mode train > "$RES/doctor_speed.txt" 2>&1
echo "doctor_speed exit $?"; cat "$RES/doctor_speed.txt"
export TRITON_CACHE_DIR=$HOME/.triton/cache
OUT=$RES/step STEP_TIMEOUT=${STEP_TIMEOUT:-400} bash benchmarks/gpu/gpu_step.sh step > "$RES/step.log" 2>&1
grep -v "^  \(SLOW\|info\|fix\)" "$RES/step.log" | head -40
echo "== done: ${SECONDS} s"
tar czf "${FINAL_OUT:-/tmp}/install-speed-step.tgz" -C "$RES" .
