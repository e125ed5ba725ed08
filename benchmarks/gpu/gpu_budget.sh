#!/usr/bin/env bash
# The step budget on the GPU machine (torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0, Python 3.12, no
# network): `kernelcheck verify --model qwen3.8-27b --step --mode train --tokens 8192 --budget` (one period of the
# 27B model: 3 GDN + 1 attention layer at the real widths, real vocabulary, checkpointing, fused AdamW), bound
# kernels vs the forced torch reference, each path's profiled step by op class against the GPU's floors.
# fla-core 0.6.0 + causal-conv1d 1.7.0 (sm_90) + tilelang 0.1.15 (fla's Hopper backward, fla#640) are installed into
# /tmp/site from the wheelhouse $WH (default /tmp/kcwh) as benchmarks/gpu/gpu_packing_batch.sh does.
#
# Carry (prepare on the CPU machine: bash benchmarks/gpu/prepare_gpu_wheelhouse.sh .carry/wh), three calls of 64 MiB:
#   run(carry=[".carry/wh/part1"], command="mkdir -p /tmp/kcwh && cp .carry/wh/part1/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part2"], command="cp .carry/wh/part2/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part3"], command="cp .carry/wh/part3/* /tmp/kcwh/ && bash benchmarks/gpu/gpu_budget.sh")
# (skip the copies when /tmp/site already imports fla, causal_conv1d and tilelang on a warm machine.) One command of
# 3-8 minutes (a cold Triton/TileLang cache is most of it; KERNELCHECK_STEP_PROFILED=1 keeps the traces small).
#
# Writes under $OUT (8 files at most come back):
#   budget.json        verify --step --budget --json: report["budget"]["paths"]["fast"|"reference"], schema
#                      kernelcheck.budget/1: per class measured ms, share, floor ms (FLOPs/bytes at the H100/H200's
#                      peaks, with the datasheet URL), gap, causes with fixes, MFU measured and projected
#   budget.txt         the same as text (the step tables, both paths)
#   budget-fast.svg    the bound path's picture: measured vs floor per class, stacked
#   step-fast.json.gz / step-reference.json.gz   the raw profiled traces the budgets were read from
#   handcount.txt      benchmarks/budget_handcount.py on step-fast.json.gz against budget.json: per class hand
#                      count vs budget, "within 2%" expected; then the same for the reference path
#   trace_budget.txt   `kernelcheck trace step-fast.json.gz --budget --model qwen3.8-27b --tokens 8192
#                      --checkpointing` on the saved trace (the user's route): the same classes as budget.json's
#   versions.txt       GPU, driver, versions; exit codes and wall times
# What proves the point: handcount.txt says "within 2%" for both paths; budget.txt names at least one cause with a
# fix (rmsnorm-unfused, loss-fp32-logits, sync-before-optimizer on the bound path) and an MFU line; the reference
# path's GDN/short-conv causes name the missing kernels. The README's headline line is filled from budget.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. benchmarks/gpu/site.sh
export PYTHONPATH="$SITE:$PWD"
export KERNELCHECK_STEP_PROFILED=${KERNELCHECK_STEP_PROFILED:-1}
kc_site
{ nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
  $py -c "import torch, triton, transformers, fla, causal_conv1d, tilelang; print(torch.__version__, triton.__version__, transformers.__version__, 'fla', fla.__version__, 'causal_conv1d', causal_conv1d.__version__, 'tilelang', tilelang.__version__)"
  git log -1 --format='kernelcheck %h %s' 2>/dev/null
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

TR=$(mktemp -d)
t0=$(date +%s)
timeout ${STEP_TIMEOUT:-480} $py -m kernelcheck verify --model qwen3.8-27b --step --mode train --tokens 8192 --budget \
  --trace-dir "$TR" --budget-svg "$OUT/budget-fast.svg" --json > "$OUT/budget.json" \
  2> /tmp/kc-budget.stderr
echo "verify --step --budget: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/versions.txt"
tail -5 /tmp/kc-budget.stderr >> "$OUT/versions.txt"
$py - "$OUT/budget.json" > "$OUT/budget.txt" <<'PY'
import json, sys
sys.path.insert(0, ".")
from kernelcheck.report import budget as budget_text
d = json.load(open(sys.argv[1]))
if "budget" not in d:
    print(d.get("error") or "no budget in the report"); sys.exit(0)
for path, b in d["budget"]["paths"].items():
    print(f"=== {path} path ===")
    print("\n".join(budget_text.text(b)))
step = d.get("step") or {}
proj = (step.get("projection") or {}).get("fast") or {}
print("projected full model (fast):", proj.get("projected_step_ms"), "ms/step,", proj.get("projected_tokens_per_s"),
      "tok/s")
PY
cat "$OUT/budget.txt"
for p in fast reference; do
  [ -f "$TR/step-$p.json.gz" ] && cp "$TR/step-$p.json.gz" "$OUT/"
done
{
  for p in fast reference; do
    [ -f "$OUT/step-$p.json.gz" ] || { echo "$p: no trace"; continue; }
    echo "=== $p path ==="
    $py - "$OUT/budget.json" "$p" > /tmp/kc-budget-$p.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps(d["budget"]["paths"][sys.argv[2]]))
PY
    $py benchmarks/budget_handcount.py "$OUT/step-$p.json.gz" /tmp/kc-budget-$p.json
  done
} > "$OUT/handcount.txt" 2>&1
cat "$OUT/handcount.txt"
t0=$(date +%s)
$py -m kernelcheck trace "$OUT/step-fast.json.gz" --budget --model qwen3.8-27b --tokens 8192 --checkpointing \
  > "$OUT/trace_budget.txt" 2>&1
echo "trace --budget: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/versions.txt"
tail -40 "$OUT/trace_budget.txt"
