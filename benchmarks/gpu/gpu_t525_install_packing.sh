#!/usr/bin/env bash
# Second part of the H200 differential call of record 2026-12-03-h200-differential-559fb36 (after benchmarks/gpu/gpu_differential.sh built /tmp/s and /tmp/kcwh):
# 1. `install --mode train` on transformers 5.25.0 + kernels 0.19.1 (offline, wheelhouse), then doctor
#    offline with an empty Hub cache (expect BROKEN, exit 4, naming the prefetch and USE_HUB_KERNELS=0) and with
#    USE_HUB_KERNELS=0 (expect READY), against the truth (gpu_truth.py: from_pretrained + one train step);
# 2. `verify --packing flash` on the baseline stack (expect correct at every length, exit 0, as doctor).
# Results in $RES2, tarred into $OUT/t525-install-packing.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
S=/tmp/s; WH=${WH:-/tmp/kcwh}; RES2=${RES2:-/tmp/res7}; PY=${PYTHON:-python3}
mkdir -p "$RES2"
export PYTHONUNBUFFERED=1 KERNELCHECK_OFFLINE=1 HF_HUB_OFFLINE=1 HF_HOME=/tmp/hf-empty TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
T525="$S/t525"
for hub in default nohub; do
  extra=(); [ $hub = nohub ] && extra=(USE_HUB_KERNELS=0)
  site=/tmp/site525-$hub
  env "${extra[@]}" PYTHONPATH="$site:$T525:$PWD" KERNELCHECK_HOME=$RES2/kch-$hub timeout 300 $PY -m kernelcheck install \
    --model qwen3.8-27b --mode train --wheelhouse "$WH" --offline --target $site > "$RES2/install-$hub.txt" 2>&1
  echo "install ($hub) exit $?" | tee "$RES2/install-$hub.exit"
  env "${extra[@]}" PYTHONPATH="$site:$T525:$PWD" timeout 300 $PY -m kernelcheck doctor --model /tmp/tiny-q35 --mode train \
    > "$RES2/doctor-$hub.txt" 2>&1; echo "doctor ($hub) exit $?" | tee "$RES2/doctor-$hub.exit"
  env "${extra[@]}" PYTHONPATH="$site:$T525" timeout 300 $PY benchmarks/gpu/gpu_truth.py --model-dir /tmp/tiny-q35 \
    --out "$RES2/truth-$hub.json" > "$RES2/truth-$hub.out" 2>&1; cat "$RES2/truth-$hub.out" | tail -1
done
PYTHONPATH="$S/tl:$S/cc:$S/base:$PWD" timeout 400 $PY -m kernelcheck verify --model qwen3.8-27b --packing flash --json \
  > "$RES2/packing.json" 2> "$RES2/packing.err"; echo "verify --packing flash exit $?" | tee "$RES2/packing.exit"
grep -c "falling back" "$RES2/packing.err" | sed 's/^/falling-back lines: /'
PYTHONPATH="$S/tl:$S/cc:$S/base:$PWD" timeout 200 $PY -m kernelcheck doctor --model qwen3.8-27b --packing flash \
  > "$RES2/doctor-packing.txt" 2>&1; echo "doctor --packing flash exit $?" | tee "$RES2/doctor-packing.exit"
tar czf "${OUT:-/tmp}/t525-install-packing.tgz" -C "$RES2" --exclude='kch-*' .
