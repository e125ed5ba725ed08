#!/usr/bin/env bash
# SIGKILL to kernelcheck's own pid on the GPU machine (torch 2.11.0+cu130, Python 3.12, no network): the OOM
# killer's way. `verify --step` starts two step workers, each holding GPU memory; with every child tied to
# kernelcheck (core/lifeline.py PR_SET_PDEATHSIG) they must be gone within seconds of the kill, and the GPU must
# hold no compute process of theirs. No wheels needed (the step runs on torch alone when no kernel package is
# installed: the fast and reference paths are then the same, which is all this check needs).
#
#   run(command="bash benchmarks/gpu/gpu_pid_kill.sh")        # about 1-3 min; no carry
#
# Expect in $OUT/pid_kill.txt: "workers: PID PID" then "left after 15 s: none" and "nvidia-smi compute apps of
# the workers: none"; exit 0. Exit 1 (and the pids) when a worker outlived the kill.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kc-out}
mkdir -p "$OUT"
LOG="$OUT/pid_kill.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" | tee "$LOG"
python -m kernelcheck verify --step --model qwen3.8-27b --shape tiny > "$OUT/step.out" 2> "$OUT/step.err" &
KC=$!
workers=""
for _ in $(seq 1 600); do
  sleep 0.5
  workers=$(ps -o pid= --ppid "$KC" | tr -s ' \n' ' ')
  [ -n "${workers// /}" ] && break
done
echo "workers: ${workers:-none}" | tee -a "$LOG"
[ -z "${workers// /}" ] && { echo "no step worker started" | tee -a "$LOG"; kill -9 "$KC"; exit 2; }
sleep 5  # let them reach the GPU
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tee -a "$LOG"
kill -9 "$KC"
sleep 15
left=""
for w in $workers; do
  if [ -e "/proc/$w" ] && ! grep -q ') Z ' "/proc/$w/stat"; then left="$left $w"; fi
done
echo "left after 15 s: ${left:-none}" | tee -a "$LOG"
apps=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr -d ' ' | grep -wF -f <(echo "$workers" | tr ' ' '\n' | grep .) || true)
echo "nvidia-smi compute apps of the workers: ${apps:-none}" | tee -a "$LOG"
for w in $left; do kill -9 "$w" 2>/dev/null; done
[ -z "$left" ] && [ -z "$apps" ]
