#!/usr/bin/env bash
# The install proof on the H200 stock image (torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0, Python 3.12,
# no network): one `kernelcheck install --model qwen3.8-27b --wheelhouse WH --offline` (train mode: fla-core,
# einops, the tilelang fix for fla#640 with its dependency window resolved by pip from WH, and the
# unlabelled causal-conv1d wheel built there by `pip wheel`, accepted by its sm_90 SASS + a trial import),
# into a --target folder so the image's packages are not changed; then doctor --mode train (expect exit 0)
# and verify --shape full --benchmark --tokens 8192 --mode train (expect exit 0 and the fwd+bwd ratio).
#
# Prepare here (CPU machine):  bash benchmarks/gpu/prepare_gpu_wheelhouse.sh   -> .carry/wh/part1..3 (~120 MiB)
# The carry limit is 64 MiB a call, so copy the parts across in three calls that each leave them on the
# warm machine (ignored paths already there are kept), e.g.
#   run(carry=[".carry/wh/part1"], command="mkdir -p /tmp/kcwh && cp .carry/wh/part1/* /tmp/kcwh/ && ls /tmp/kcwh")
#   run(carry=[".carry/wh/part2"], command="cp .carry/wh/part2/* /tmp/kcwh/ && ls /tmp/kcwh")
#   run(carry=[".carry/wh/part3"], command="cp .carry/wh/part3/* /tmp/kcwh/ && WH=/tmp/kcwh bash benchmarks/gpu/gpu_install_proof.sh")
# Output under $OUT (default out/gpu-install-proof). Budget: install < 1 min, doctor ~20 s, verify a few minutes
# (cold Triton/TileLang compile); run with timeout_s=600.
set -uo pipefail
OUT=${OUT:-out/gpu-install-proof}
PY=${PYTHON:-python3}
WH=${WH:-/tmp/kcwh}
SITE=${SITE:-/tmp/kc-proof-site}
MODEL=qwen3.8-27b
mkdir -p "$OUT" "$SITE"
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export KERNELCHECK_OFFLINE=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || echo "no nvidia-smi"
  $PY -c "import torch, triton, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  $PY -m pip freeze > "$OUT/freeze_before.txt"
  ls -l "$WH"; du -sh "$WH"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "== 0. the image as it is: pip check, and plain pip resolving the fix offline (what install hit on 2026-12-02: measurement record 2026-12-02-h200-install-packing-49d9626)"
$PY -m pip check > "$OUT/pip_check.txt" 2>&1; echo "pip check exit $?" >> "$OUT/pip_check.txt"
grep -c . "$OUT/pip_check.txt"; head -5 "$OUT/pip_check.txt"
printf 'torch==%s\ntriton==%s\ntransformers==%s\n' "$($PY -c 'import torch;print(torch.__version__)')" \
  "$($PY -c 'import triton;print(triton.__version__)')" "$($PY -c 'import transformers;print(transformers.__version__)')" \
  > /tmp/kc-pins.txt
$PY -m pip install --dry-run --no-index --find-links "$WH" -c /tmp/kc-pins.txt "tilelang==0.1.15" \
  "apache-tvm-ffi>=0.1.11,<0.1.13" > "$OUT/pip_plain_resolve.txt" 2>&1
echo "plain pip resolve exit $?" | tee -a "$OUT/pip_plain_resolve.txt"; grep -E "ERROR|conflict|requires" "$OUT/pip_plain_resolve.txt" | head -8

echo "== 1. dry run (the plan, nothing changed)"
$PY -m kernelcheck install --model $MODEL --mode train --wheelhouse "$WH" --offline --target "$SITE" --dry-run \
  > "$OUT/install_dry_run.txt" 2>&1
echo "dry run exit $? (expect 0)" | tee "$OUT/install_dry_run.exit"

echo "== 2. install (train): fla-core, einops, tilelang + window, causal-conv1d (unlabelled wheel, trial import)"
t0=$(date +%s)
$PY -m kernelcheck install --model $MODEL --mode train --wheelhouse "$WH" --offline --target "$SITE" \
  > "$OUT/install.txt" 2>&1
rc=$?
echo "install exit $rc (expect 0), $(( $(date +%s) - t0 )) s" | tee "$OUT/install.exit"
$PY -m kernelcheck install --model $MODEL --mode train --wheelhouse "$WH" --offline --target "$SITE" --dry-run \
  --json > "$OUT/install_after.json" 2>/dev/null   # a second plan: every step keep
cp "$SITE"/.kernelcheck-manifest.json "$OUT/manifest.json" 2>/dev/null
cp "$WH"/*.kernelcheck.json "$OUT"/ 2>/dev/null   # what the trial import verified (sidecar)
$PY -m pip freeze > "$OUT/freeze_after.txt"
diff "$OUT/freeze_before.txt" "$OUT/freeze_after.txt" > "$OUT/freeze.diff" && echo "stock packages unchanged" | tee -a "$OUT/install.exit"

echo "== 3. doctor --mode train (expect READY, exit 0)"
$PY -m kernelcheck doctor --model $MODEL --mode train > "$OUT/doctor_train.txt" 2>&1
echo "doctor exit $? (expect 0)" | tee "$OUT/doctor.exit"
grep -E "verdict|tilelang|fla-640" "$OUT/doctor_train.txt"

echo "== 3b. where doctor's time goes (cProfile + import times; SKIP_PROFILE=1 skips)"
if [ -z "${SKIP_PROFILE:-}" ]; then
( time $PY -m kernelcheck doctor --model $MODEL --mode train > /dev/null 2>&1 ) 2> "$OUT/doctor_time.txt"
$PY -X importtime -m cProfile -o "$OUT/doctor.prof" -m kernelcheck doctor --model $MODEL --mode train \
  > /dev/null 2> "$OUT/doctor_importtime.txt"
$PY -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(40)" "$OUT/doctor.prof" \
  > "$OUT/doctor_profile.txt" 2>&1
cat "$OUT/doctor_time.txt"; sort -t'|' -k2 -n "$OUT/doctor_importtime.txt" | tail -12
fi

echo "== 4. verify --shape full --benchmark --tokens 8192 --mode train (expect exit 0, fwd+bwd ratio)"
timeout ${VERIFY_TIMEOUT:-400} $PY -m kernelcheck verify --model $MODEL --shape full --benchmark --tokens 8192 --mode train \
  > "$OUT/verify_train.txt" 2>"$OUT/verify_train.stderr"
echo "verify exit $? (expect 0)" | tee "$OUT/verify.exit"
grep -iE "ms|x faster|ratio|verdict" "$OUT/verify_train.txt" | head -20
cat "$OUT"/*.exit
