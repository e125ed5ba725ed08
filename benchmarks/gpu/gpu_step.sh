#!/usr/bin/env bash
# `kernelcheck verify --step` on the GPU machine (H200; torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0,
# Python 3.12, no network). fla-core + causal-conv1d + tilelang must already be importable from
# PYTHONPATH=/tmp/site (the lead installs them first). Writes under $OUT:
#   step.json / step.txt         verify --model qwen3.8-27b --step --mode train --tokens 8192 (one period:
#                                3 GDN + 1 attention, real vocab/head, checkpointing, fused AdamW), fast vs torch
#   step8.json / step8.txt       the same with --layers 8 (the measured run the projection is checked against);
#                                traces8/step-{fast,reference}.json.gz its traces (2 profiled steps: the spread)
#   projection_check.txt         the 4-layer run's per-layer costs projected to 8 layers vs the measured 8 layers,
#                                and the full-model projections from 4 and from 8 layers (expect within 10%)
#   traces/step-{fast,reference}.json.gz   whole-step traces for tests/data/gpu (each < 5 MB, else 1 profiled step)
#   trace_fast.txt / trace_reference.txt   `kernelcheck trace` on them; *.annotated.json.gz for Perfetto
#   versions.txt, cost.txt       versions; wall time of each part (cold = first run with an empty Triton cache)
#
#   bash benchmarks/gpu/gpu_step.sh            # step, then step8 (two commands of < 10 min each if run separately:)
#   bash benchmarks/gpu/gpu_step.sh step       # cold: empties $TRITON_CACHE_DIR first
#   bash benchmarks/gpu/gpu_step.sh step8      # warm
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kc-out}
mkdir -p "$OUT/traces"
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/kc-triton-step}
export HF_HUB_OFFLINE=1
PARTS=${*:-step step8}
{
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton, transformers, fla, causal_conv1d; print(sys.version.split()[0], torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'fla', fla.__version__, 'causal_conv1d', causal_conv1d.__version__)"
  python3 -c "import tilelang; print('tilelang', tilelang.__version__)"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

run_step() {  # name, extra args...
  local name=$1; shift
  local t0=$(date +%s)
  timeout ${STEP_TIMEOUT:-290} python3 -m kernelcheck verify --model qwen3.8-27b --step --mode train --tokens 8192 "$@" --json \
    > "$OUT/$name.json" 2> "$OUT/$name.stderr"
  echo "$name exit $? in $(( $(date +%s) - t0 )) s (Triton cache entries: $(ls "$TRITON_CACHE_DIR" 2>/dev/null | wc -l))" \
    | tee -a "$OUT/cost.txt"
  python3 - "$OUT/$name.json" > "$OUT/$name.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("\n".join(d.get("live", {}).get("lines", [])) or d.get("error"))
PY
  cat "$OUT/$name.txt"
}

for part in $PARTS; do
  case $part in
    step)
      [ -n "${KEEP_TRITON_CACHE:-}" ] || rm -rf "$TRITON_CACHE_DIR"
      KERNELCHECK_STEP_PROFILED=${KERNELCHECK_STEP_PROFILED:-1} run_step step --trace-dir "$OUT/traces"
      for p in fast reference; do
        f="$OUT/traces/step-$p.json.gz"
        [ -f "$f" ] || continue
        if [ "$(stat -c %s "$f")" -gt 5000000 ]; then  # too big to commit: one profiled step instead
          echo "step-$p.json.gz is $(stat -c %s "$f") bytes: re-recording with one profiled step" | tee -a "$OUT/cost.txt"
          mkdir -p "$OUT/traces1"
          KERNELCHECK_STEP_PROFILED=1 python3 -m kernelcheck verify --model qwen3.8-27b --step --tokens 8192 \
            --trace-dir "$OUT/traces1" --json > "$OUT/step_profiled1.json" 2>/dev/null
          cp "$OUT/traces1/step-$p.json.gz" "$f"
        fi
        python3 -m kernelcheck trace "$f" --annotate "$OUT/traces/step-$p.annotated.json.gz" > "$OUT/trace_$p.txt" 2>&1
        echo "trace $p: exit $?; $(stat -c %s "$f") bytes"; tail -25 "$OUT/trace_$p.txt"
      done
      ;;
    step8)
      mkdir -p "$OUT/traces8"
      KERNELCHECK_STEP_PROFILED=${KERNELCHECK_STEP_PROFILED:-2} run_step step8 --layers 8 --trace-dir "$OUT/traces8"
      ;;
  esac
done

if [ -f "$OUT/step.json" ] && [ -f "$OUT/step8.json" ]; then
  python3 - "$OUT/step.json" "$OUT/step8.json" > "$OUT/projection_check.txt" <<'PY'
import json, sys
four, eight = (json.load(open(p))["step"] for p in sys.argv[1:3])
for path in ("fast", "reference"):
    pj, m8 = four["projection"][path], eight["paths"][path]
    if "per_layer" not in pj or "step_ms" not in m8:
        print(path, "missing:", pj.get("error"), m8.get("error")); continue
    built8 = {}
    for t in m8["layers"]:
        built8[t] = built8.get(t, 0) + 1
    pred = pj["measured_step_ms"] + sum((built8[t] - pj["built_layers"].get(t, 0)) * pj["per_layer"][t]["total_ms"]
                                        for t in built8)
    err = (pred - m8["step_ms"]) / m8["step_ms"]
    print(f"{path}: 4-layer run projects 8 layers to {pred:.1f} ms; measured 8 layers {m8['step_ms']:.1f} ms "
          f"({err:+.1%}); full model projected {pj['projected_step_ms']:.1f} ms, {pj['projected_tokens_per_s']} tok/s")
    p8 = eight["projection"][path]
    if "projected_step_ms" in p8:
        agree = (p8["projected_step_ms"] - pj["projected_step_ms"]) / pj["projected_step_ms"]
        per = "; ".join(f"{t} {pj['per_layer'][t]['layer_ms']:.1f} vs {p8['per_layer'][t]['layer_ms']:.1f} ms"
                        for t in pj["per_layer"])
        print(f"{path}: full model from 8 layers {p8['projected_step_ms']:.1f} ms ({agree:+.1%} vs from 4 layers; "
              f"{'within' if abs(agree) <= 0.10 else 'OUTSIDE'} 10%); per layer 4 vs 8: {per}")
print("projected speedup (full model):", four["projection"].get("projected_speedup"),
      "| from 8 layers:", eight["projection"].get("projected_speedup"),
      "| measured speedup 4 layers:", four.get("speedup"), "| 8 layers:", eight.get("speedup"))
PY
  cat "$OUT/projection_check.txt"
fi
