#!/usr/bin/env bash
# transformers 5.25's Hub-kernel default, offline with an empty Hub cache, on the GPU machine: does a job's
# from_pretrained + train step of a tiny llama and a tiny qwen3_5 raise, (a) with the GPU visible (the CUDA
# prediction doctor makes on a login node), (b) with CUDA torch and no GPU visible (CUDA_VISIBLE_DEVICES=, the login
# node itself, on the CPU), (c) with USE_HUB_KERNELS=0 on the GPU. Beside each truth, kernelcheck doctor's exit code
# for the same folder and device.
# Prepare here: the 5.25 stack's wheels in .carry/t525 (transformers 5.25.0, kernels 0.19.1, huggingface_hub 2.x and
# what the GPU image lacks of their requirements; benchmarks/prepare_differential.sh lists them). Then:
#   run(carry=[".carry/t525"], command="bash benchmarks/gpu_hub_default_load.sh")
# Results: $OUT/hub-default-load.tgz (one truth-*.json and doctor-*.json per case, summary.md).
set -uo pipefail
cd "$(dirname "$0")/.."
S=/tmp/t525site RES=${RES:-/tmp/hubload} PY=${PYTHON:-python3}
mkdir -p "$RES"
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S" .carry/t525/*.whl \
  > "$RES/site.log" 2>&1 || { echo "site failed"; tail -5 "$RES/site.log"; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 KERNELCHECK_OFFLINE=1
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$RES/gpu.txt"
echo "| type | case | loaded | step | error | doctor rc |" > "$RES/summary.md"
echo "|---|---|---|---|---|---|" >> "$RES/summary.md"
for t in llama qwen3_5; do
  for case in gpu_default cpu_cuda_torch gpu_nohub; do
    hf=$(mktemp -d); envs=(env "PYTHONPATH=$S:$PWD" "HF_HOME=$hf" "KERNELCHECK_HOME=$RES/kc-$t-$case")
    dev=cuda; dflag=()
    case $case in
      cpu_cuda_torch) envs+=("CUDA_VISIBLE_DEVICES="); dev=cpu ;;
      gpu_nohub) envs+=("USE_HUB_KERNELS=0") ;;
    esac
    folder=/tmp/tiny-$t
    "${envs[@]}" $PY benchmarks/hub_default_load_truth.py --type $t --folder $folder --device $dev \
      > "$RES/truth-$t-$case.json" 2> "$RES/truth-$t-$case.err"
    "${envs[@]}" $PY -m kernelcheck doctor --model $folder --mode train --json > "$RES/doctor-$t-$case.json" \
      2> "$RES/doctor-$t-$case.err"
    rc=$?
    # the device-naming doctor, where this kernelcheck has --device
    if "${envs[@]}" $PY -m kernelcheck doctor --help 2>/dev/null | grep -q -- '--device'; then
      "${envs[@]}" $PY -m kernelcheck doctor --model $folder --mode train --device $dev --json \
        > "$RES/doctor-device-$t-$case.json" 2> "$RES/doctor-device-$t-$case.err"
      rc="$rc / --device $dev: $?"
    fi
    $PY - "$RES/truth-$t-$case.json" "$t" "$case" "$rc" >> "$RES/summary.md" <<'PYEOF'
import json, sys
path, t, case, rc = sys.argv[1:]
try:
    d = json.load(open(path))
except Exception as exc:
    print(f"| {t} | {case} | ? | ? | truth unreadable: {exc} | {rc} |"); raise SystemExit
err = (d.get("load_error") or d.get("step_error") or "").replace("|", "/")[:160]
print(f"| {t} | {case} | {d['loaded']} | {d['step_ok']} | {err} | {rc} |")
PYEOF
  done
done
cat "$RES/summary.md"
tar czf "$OUT/hub-default-load.tgz" -C "$RES" . 2>/dev/null
