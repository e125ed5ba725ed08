#!/usr/bin/env bash
# A user's first hour (progress on long steps, usage errors, the install's report) on the H200 (torch 2.11.0+cu130 image, kernelcheck installed from this checkout).
# Evidence written to ${OUT:-/tmp/first_hour}:
#  - report_issue.md: `doctor --report-issue`: cuDNN "9.x.y (9xxxx)", NCCL "2.x.y", GPUs "NVIDIA H200 (sm_90)", the driver.
#  - plan_here.json vs plan_cpu_target.json: the real dry-run plan here and the plan a CPU box makes with
#    --torch 2.11 --cuda 13.0 --python 3.12 --arch 9.0; the `package/action/spec` triples should agree
#    (diff printed; tilelang may differ: see docs/install.md "Known limit").
#  - wheelhouse_before/after.txt: identical (a dry run writes nothing to the wheelhouse).
#  - verify_tty.txt: `verify` under a pseudo-terminal: the "... N s; Triton cache ...: +K entries" progress line.
set -u
OUT=${OUT:-/tmp/first_hour}; mkdir -p "$OUT"
M=qwen3.8-27b
kernelcheck doctor --model $M --report-issue > "$OUT/report_issue.md"; echo "doctor rc=$?" >> "$OUT/rc.txt"
WH=${KERNELCHECK_HOME:-$HOME/.cache/kernelcheck}/wheelhouse
ls -la "$WH" > "$OUT/wheelhouse_before.txt" 2>&1
kernelcheck install --model $M --dry-run --json > "$OUT/plan_here.json" 2> "$OUT/plan_here.err"
echo "install-here rc=$?" >> "$OUT/rc.txt"
ls -la "$WH" > "$OUT/wheelhouse_after.txt" 2>&1
CUDA_VISIBLE_DEVICES= kernelcheck install --model $M --dry-run --json --torch 2.11 --cuda 13.0 --python 3.12 \
  --arch 9.0 > "$OUT/plan_cpu_target.json" 2> "$OUT/plan_cpu_target.err"
echo "install-target rc=$?" >> "$OUT/rc.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def steps(name):
    rep = json.load(open(f"{out}/{name}"))
    return sorted((s["package"], s["action"], s["spec"]) for s in rep.get("plan") or [])
a, b = steps("plan_here.json"), steps("plan_cpu_target.json")
print("here only:", sorted(set(a) - set(b))); print("target only:", sorted(set(b) - set(a)))
PY
diff -q "$OUT/wheelhouse_before.txt" "$OUT/wheelhouse_after.txt" && echo "wheelhouse unchanged by the dry run"
script -qec "kernelcheck verify --model $M" /dev/null > "$OUT/verify_tty.txt" 2>&1; echo "verify rc=$?" >> "$OUT/rc.txt"
cat "$OUT/rc.txt"
