#!/usr/bin/env bash
# One GPU-machine call that proves verify and trace on the H200 within a single 10-minute command:
#   A. verify --shape full --benchmark (27B GDN layer, 8192 tokens, infer): fast path + speed/kernel ratios
#   B. record the fast and the fallback GDN traces (tests/data/gpu) and analyse them
#   C. verify --shape tiny --mode train (fla#640 expected: broken, with the fix)
#   D. verify --shape tiny --mode infer (everything fast)
#   E. doctor speed against transformers env
# Needs .carry/ (benchmarks/gpu/prepare_carry.sh). Results go to $W and, tarred, to $OUT/gpu-verify-traces.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
W=${W:-/tmp/kc-verify-traces}
mkdir -p "$W"
SITE=/tmp/site
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" .carry/*.whl
python3 -m compileall -q "$SITE" > /dev/null 2>&1
export PYTHONPATH="$SITE:$PWD" TRITON_CACHE_DIR=/tmp/kc-triton HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
part() {  # part NAME LIMIT CMD...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$W/$name.out" 2> "$W/$name.err"
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s: $*" | tee -a "$W/summary.txt"
}
part full_infer 210 python3 -m kernelcheck verify --model qwen3.8-27b --shape full --benchmark --tokens 8192 --mode infer --json
part traces 150 python3 benchmarks/record_gdn_traces.py --out "$W/traces"
part tiny_train 110 python3 -m kernelcheck verify --model qwen3.8-27b --mode train --json
part tiny_infer 70 python3 -m kernelcheck verify --model qwen3.8-27b --mode infer
part doctor_speed 45 python3 benchmarks/doctor_speed.py --runs 1
