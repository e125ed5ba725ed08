#!/usr/bin/env bash
# `kernelcheck verify` on the GPU machine (one H200; torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0,
# Python 3.12, no network). Needs .carry/ from benchmarks/gpu/prepare_carry.sh (fla-core 0.6.0, einops,
# causal-conv1d 1.7.0 cp312 sm_90). Writes JSON and text under $OUT; the Triton cache stays in /tmp.
#
#   bash benchmarks/gpu/gpu_verify.sh cost tiny    # cold vs warm tiny verify, then tiny infer/train  (~5-8 min)
#   bash benchmarks/gpu/gpu_verify.sh full         # full-size layers, 8192 tokens, --benchmark       (~4-8 min)
#   bash benchmarks/gpu/gpu_verify.sh full-infer   # or one at a time when a cold compile is slow
#   bash benchmarks/gpu/gpu_verify.sh              # all of it (will not fit one 10-minute command)
# `cost` empties the Triton cache first (that is the cold measurement): run it first, not after the others.
#
# What to look for:
#   tiny_infer.json  all four GDN functions "fast" with fla/causal_conv1d kernel names in
#                    evidence.fast_kernels_seen and vs_reference ok; reference_comparison ok; exit 0 unless a
#                    static finding (doctor's part of the report) says otherwise.
#   tiny_train.json  exit 4: chunk_gated_delta_rule "broken", evidence.error.phase "backward", RuntimeError
#                    naming fla#640, fix "pip install tilelang ..." (fla-640-refuses); forward evidence fast.
#   full_infer.json  live.benchmark.speedup around 9.5 and kernel_ratio in the tens (docs/facts.md section 6).
#   verify_cost.txt  cold vs warm excluding import (targets: < 60 s cold, < 15 s warm).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kc-out}
mkdir -p "$OUT"
SITE=${SITE:-/tmp/site}
if [ ! -f "$SITE/.kc-installed" ]; then
  python3 -m pip install --quiet --no-index --no-deps --target "$SITE" .carry/*.whl || exit 1
  python3 -m compileall -q "$SITE" >/dev/null 2>&1  # bytecode now: a cold import was 25 s without it
  touch "$SITE/.kc-installed"
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/kc-triton-cache}
export HF_HUB_OFFLINE=1
PARTS=${*:-cost tiny full}

{
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton, transformers, fla, causal_conv1d; print(sys.version.split()[0], torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'fla', fla.__version__, 'causal_conv1d', causal_conv1d.__version__)"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

v() {  # v NAME TIMEOUT ARGS... : one verify run, JSON to NAME.json, progress/stderr to NAME.err
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" python3 -m kernelcheck verify --model qwen3.8-27b "$@" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - t0 )) s  (kernelcheck verify $*)" | tee -a "$OUT/summary.txt"
  python3 - "$OUT/$name.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
for f in r.get("functions", []):
    ev = f.get("evidence") or {}
    print(f"  {f['status']:<11} {f['name']:<34} path={ev.get('path')} calls={ev.get('calls')} kernels={ev.get('gpu_kernels')}"
          f"+{ev.get('backward_gpu_kernels')} fast_kernels={ev.get('fast_kernels_seen', [])[:3]}")
    if f.get("reason"): print(f"      why: {f['reason'][:300]}")
    if f.get("fix"): print(f"      fix: {f['fix'][:200]}")
for line in (r.get("live") or {}).get("lines", []): print("  " + line)
print(f"  verdict {r.get('verdict')} exit {r.get('exit_code')}")
PY
}

for part in $PARTS; do
  case $part in
    cost)
      timeout 420 python3 benchmarks/verify_cost.py --mode infer --cache-dir "$TRITON_CACHE_DIR" \
        --out "$OUT/verify_cost.json" 2>&1 | tee "$OUT/verify_cost.txt" ;;
    tiny)
      v tiny_infer 300 --mode infer
      v tiny_train 300 --mode train
      timeout 120 python3 -m kernelcheck doctor --model qwen3.8-27b --mode infer --live > "$OUT/doctor_live.txt" 2>&1
      echo "doctor --live: exit $?" | tee -a "$OUT/summary.txt" ;;
    full) v full_infer 280 --shape full --benchmark --tokens 8192 --mode infer
          v full_train 280 --shape full --benchmark --tokens 8192 --mode train ;;
    full-infer) v full_infer 560 --shape full --benchmark --tokens 8192 --mode infer ;;
    full-train) v full_train 560 --shape full --benchmark --tokens 8192 --mode train ;;
    *) echo "unknown part $part (cost, tiny, full, full-infer, full-train)"; exit 2 ;;
  esac
done
echo "Triton cache $TRITON_CACHE_DIR: $(ls "$TRITON_CACHE_DIR" 2>/dev/null | wc -l) entries"
