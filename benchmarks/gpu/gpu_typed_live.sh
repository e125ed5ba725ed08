#!/usr/bin/env bash
# The typed live values on real hardware: `verify --shape full --benchmark` (the benchmark and timing,
# typed since 0af8bbf) and `verify --step` (StepSection: typed fallback signatures, worker cost, launch delay),
# both on the GPU machine with the kernels install puts (fla-core 0.6.0, causal-conv1d 1.7.0 sm_90, tilelang 0.1.15
# + apache-tvm-ffi 0.1.12), from the wheels benchmarks/gpu/gpu_differential.sh carries into $WH (default /tmp/kcwh).
# Writes $OUT/typed_live.tgz: bench.json/.err, step.json/.err, versions.txt, cost.txt.
# Read back on the CPU machine: tests/unit/test_report_readback.py reads the recorded JSON back typed.
set -uo pipefail
cd "$(dirname "$0")/../.."
WH=${WH:-/tmp/kcwh}
R=/tmp/typed-live
mkdir -p "$R" /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $WH/fla_core-0.6.0-*.whl \
  $WH/einops-*.whl $WH/causal_conv1d-1.7.0-*.whl $WH/tilelang-0.1.15-*.whl $WH/apache_tvm_ffi-0.1.12-*.whl \
  $WH/torch_c_dlpack_ext-*.whl $WH/z3_solver-*.whl > "$R/site.log" 2>&1 || tail -3 "$R/site.log"
export PYTHONPATH="/tmp/site:$PWD" HF_HUB_OFFLINE=1 KERNELCHECK_OFFLINE=1 TRITON_CACHE_DIR=/tmp/kc-triton
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers, fla, causal_conv1d, tilelang; print(torch.__version__, triton.__version__, transformers.__version__, fla.__version__, causal_conv1d.__version__, tilelang.__version__)"
} > "$R/versions.txt" 2>&1
cat "$R/versions.txt"
t0=$(date +%s)
timeout ${BENCH_TIMEOUT:-240} python3 -m kernelcheck verify --model qwen3.8-27b --shape full --benchmark --tokens 8192 \
  --mode train --json > "$R/bench.json" 2> "$R/bench.err"
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$R/cost.txt"
t0=$(date +%s)
timeout ${STEP_TIMEOUT:-240} python3 -m kernelcheck verify --model qwen3.8-27b --step --mode train --tokens 8192 \
  --json > "$R/step.json" 2> "$R/step.err"
echo "step exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$R/cost.txt"
tar czf "${OUT:-/tmp}/typed_live.tgz" -C "$R" bench.json bench.err step.json step.err versions.txt cost.txt
