#!/usr/bin/env bash
# One device call for the install proof and the install's speed when little device time is left: the install proof (install ->
# doctor --mode train -> verify --shape full --benchmark --mode train) and then `verify --step` on 4 layers,
# and --layers 8 only if the deadline allows. Wheelhouse parts must already be in /tmp/kcwh (see
# benchmarks/gpu/gpu_install_proof.sh for the carry calls). Results: $OUT/install-proof-step.tgz.
#   DEADLINE=480 bash benchmarks/gpu/gpu_install_proof_step.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
DEADLINE=${DEADLINE:-480}
RES=/tmp/res4
mkdir -p "$RES"
OUT=$RES/proof WH=/tmp/kcwh SITE=/tmp/site SKIP_PROFILE=1 VERIFY_TIMEOUT=${VERIFY_TIMEOUT:-170} \
  bash benchmarks/gpu/gpu_install_proof.sh > "$RES/proof.log" 2>&1
tail -40 "$RES/proof.log"
echo "== after the proof: ${SECONDS} s"
export TRITON_CACHE_DIR=$HOME/.triton/cache KEEP_TRITON_CACHE=1
left=$(( DEADLINE - SECONDS ))
if [ "$left" -gt ${STEP_MIN:-150} ]; then
  OUT=$RES/step STEP_TIMEOUT=$(( left > 240 ? 240 : left - 10 )) bash benchmarks/gpu/gpu_step.sh step > "$RES/step.log" 2>&1
  tail -30 "$RES/step.log"
fi
left=$(( DEADLINE - SECONDS ))
echo "== after step: ${SECONDS} s, ${left} s left"
if [ "$left" -gt 120 ]; then
  OUT=$RES/step STEP_TIMEOUT=$(( left - 10 )) bash benchmarks/gpu/gpu_step.sh step8 > "$RES/step8.log" 2>&1
  tail -12 "$RES/step8.log"
fi
echo "== done: ${SECONDS} s"
tar czf "${FINAL_OUT:-/tmp}/install-proof-step.tgz" -C "$RES" .
