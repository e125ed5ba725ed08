#!/usr/bin/env bash
# `kernelcheck verify --packing` and `doctor --packing` on the GPU machine (H200; torch 2.11.0+cu130,
# triton 3.6.0, transformers 5.17.0, Python 3.12, no network), with fla-core + causal-conv1d (+ tilelang)
# already installed by the lead into PYTHONPATH=/tmp/site. Under ~3 minutes (tiny model; first Triton compile).
#
#   PYTHONPATH=/tmp/site bash benchmarks/gpu/gpu_packing.sh
#
# Writes under $OUT: verify_packing.json/.txt (per mode: outcome, doctor's decision, agrees, and per length
# short 12+10 / chunk 60+70 / long 300+260: max |logit diff|, per layer type in isolation), verify_packing_<mode>
# exit codes, doctor_packing_<mode>.json (the decision from source), torch_path.json (the same measurement with
# the kernels hidden: USE_HUB_KERNELS=0 and fla/causal_conv1d not importable -> torch path).
# Batches: DataCollatorWithFlattening with each mode's flags; training forward (use_cache=False).
# Expect with kernels bound on 5.17.0: position_ids mixed (linear_attention > 0, full_attention ~0),
# cu_seq_lens mixed (the conv gets no seq_idx), flash correct at every length (< 2e-2, was `mixed 0.287`
# with the old cached forward); every mode "agrees": true; verify --packing flash exit 0 = doctor --packing
# flash exit 0; position_ids exit 4 on both; cached_forward_max_logit_diff ~0.3 (the cache, not the kernels).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kc-out}
mkdir -p "$OUT"
SITE=${SITE:-/tmp/site}
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
py=${PYTHON:-python3}
{ $py -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"
  $py -c "import fla, causal_conv1d; print('fla', fla.__version__, 'causal_conv1d', causal_conv1d.__version__)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 240 $py -m kernelcheck verify --model qwen3.8-27b --packing flash --json > "$OUT/verify_packing.json" 2> "$OUT/verify_packing.err"
echo "verify --packing flash exit $?"
timeout 240 $py -m kernelcheck verify --model qwen3.8-27b --packing position_ids > "$OUT/verify_packing_position_ids.txt" 2>> "$OUT/verify_packing.err"
echo "verify --packing position_ids exit $?"
grep -c "falling back" "$OUT/verify_packing.err" | sed 's/^/transformers fallback lines on stderr (expect 0): /'
timeout 120 $py -m kernelcheck.verify.packing cuda > "$OUT/verify_packing.txt" 2>> "$OUT/verify_packing.err"
cat "$OUT/verify_packing.txt"
for mode in position_ids cu_seq_lens flash; do
  timeout 60 $py -m kernelcheck doctor --model qwen3.8-27b --packing "$mode" --json > "$OUT/doctor_packing_$mode.json" 2>/dev/null
  echo "doctor --packing $mode exit $?"
done
# The torch path on the same GPU: hide the kernel packages (a shadow package that fails to import).
SHADOW=$(mktemp -d)
for m in fla causal_conv1d; do mkdir -p "$SHADOW/$m"; echo "raise ImportError('hidden by gpu_packing.sh')" > "$SHADOW/$m/__init__.py"; done
USE_HUB_KERNELS=0 PYTHONPATH="$SHADOW:$PYTHONPATH" timeout 120 $py -m kernelcheck.verify.packing --json cuda > "$OUT/torch_path.json" 2>> "$OUT/verify_packing.err"
echo "torch path (kernels hidden):"; cat "$OUT/torch_path.json"
rm -rf "$SHADOW"
