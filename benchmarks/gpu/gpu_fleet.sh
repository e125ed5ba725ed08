#!/usr/bin/env bash
# The fleet gate on one multi-GPU box: one rank per GPU, each rank pinned to its GPU by torchrun's
# LOCAL_RANK, the gather on its own gloo group (no NCCL). Writes under $OUT:
#   fleet.json   rank 0's fleet object (schema kernelcheck.fleet/1): every rank's GPU, status, verdict
#   fleet.txt    the text table;  rc.txt  torchrun's exit code (the fleet's worst verdict)
# Run from the repository root on the GPU image (kernel packages from .whl/ or the image):
#   OUT=/tmp/out bash benchmarks/gpu/gpu_fleet.sh [MODEL]
set -u
OUT="${OUT:-/tmp/kernelcheck-fleet}"; mkdir -p "$OUT"
model="${1:-qwen3.8-27b}"
n="$(nvidia-smi -L 2>/dev/null | wc -l)"; [ "$n" -ge 1 ] || n=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1
torchrun --nproc-per-node "$n" --master-port 29555 -m kernelcheck doctor --model "$model" --all-ranks --json \
    --timeout 120 > "$OUT/fleet.json" 2> "$OUT/stderr.txt"
echo $? > "$OUT/rc.txt"
torchrun --nproc-per-node "$n" --master-port 29556 -m kernelcheck doctor --model "$model" --all-ranks \
    --timeout 120 > "$OUT/fleet.txt" 2>> "$OUT/stderr.txt"
cat "$OUT/fleet.txt"; echo "exit $(cat "$OUT/rc.txt")"
