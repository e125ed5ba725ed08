#!/usr/bin/env bash
# `verify --packing --batch` and the packing payoff on the GPU machine (torch 2.11.0+cu130, triton 3.6.0,
# transformers 5.17.0, Python 3.12, no network), on the real kernels: fla-core 0.6.0, causal-conv1d 1.7.0 (sm_90)
# and tilelang 0.1.15 + apache-tvm-ffi 0.1.12 (fla's Hopper backward, fla#640), installed into /tmp/site from the
# wheelhouse $WH (default /tmp/kcwh) as benchmarks/gpu/gpu_typed_live.sh does.
#
# Carry (prepare on the CPU machine: bash benchmarks/gpu/prepare_gpu_wheelhouse.sh .carry/wh), three calls of 64 MiB:
#   run(carry=[".carry/wh/part1"], command="mkdir -p /tmp/kcwh && cp .carry/wh/part1/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part2"], command="cp .carry/wh/part2/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part3"], command="cp .carry/wh/part3/* /tmp/kcwh/ && bash benchmarks/gpu/gpu_packing_batch.sh batches")
#   run(command="bash benchmarks/gpu/gpu_packing_batch.sh payoff")           # same warm machine, its own 10 minutes
#   run(command="bash benchmarks/gpu/gpu_packing_batch.sh payoff_lengths")    # optional: a shorter chat-like mix
# (skip the copies when /tmp/site already imports fla, causal_conv1d and tilelang on a warm machine.)
# Parts: `batches` (the three batches, ~2-6 min with a cold Triton/TileLang cache), `payoff` (padded and packed
# steps at the full shape on the default mix, ~2-6 min), `payoff_lengths` (the same on lengths.txt); no argument
# runs all three (will not fit one 10-minute command).
#
# Each case runs in its own process (a kernel crash on a bad batch must not take the others down). Batches are
# built here with transformers' DataCollatorWithFlattening over 40 + 70 + 30 tokens (fla's chunk is 64):
#   clean          return_flash_attn_kwargs=True, return_seq_idx=True. Expect: reach shows cu_seqlens reaching
#                  chunk_gated_delta_rule and seq_idx reaching causal_conv1d_fn (kernels, not the torch path);
#                  every segment ok forward and backward in bf16 (relative L2 < 5e-2); exit 0.
#   zero_length    the same with cu_seq_lens_q/k ending in a repeated offset (AReaL#1103, Megatron-LM#3282).
#                  Expect: packing-zero-length-segment; then whatever the kernels do with it, measured: exit 0
#                  if they skip the empty segment, 4 (packing-batch-raises, or a wrong segment) if not.
#   position_ids   DataCollatorWithFlattening() defaults (TRL padding_free passes the same). Expect:
#                  packing-position-ids-only, reach: no cu_seqlens/seq_idx anywhere, segments 1 and 2 WRONG from
#                  layer 0 (linear_attention), segment 0 wrong in the backward only; exit 4.
#   payoff         verify --packing --benchmark: one training step (fwd, loss, bwd, AdamW) at the full shape (the
#                  27B GDN layer at hidden 5120 + one attention layer, bf16) on the default long-tailed mix of 16
#                  examples (13,186 real tokens, longest 4,096: 65,536 padded, 80% padding) padded vs packed.
#                  Expect packed_with "cu_seq_lens + seq_idx" and ratio > 1; the ratio is the number to record
#                  in matrix/verified.toml. payoff_lengths: the same with lengths.txt (a shorter chat-like mix).
# Writes under $OUT: versions.txt, <case>.json/.txt/.err, exit codes in exits.txt, payoff*.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
. benchmarks/gpu/site.sh
export PYTHONPATH="$SITE:$PWD"
kc_site
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  $py -c "import torch, triton, transformers, fla, causal_conv1d, tilelang; print(torch.__version__, triton.__version__, transformers.__version__, 'fla', fla.__version__, 'causal_conv1d', causal_conv1d.__version__, 'tilelang', tilelang.__version__)"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

PARTS=${*:-batches payoff payoff_lengths}
B=$(mktemp -d)
$py - "$B" <<'EOF'
import sys, torch
from transformers import DataCollatorWithFlattening
out = sys.argv[1]
seqs = [list(range(1, 41)), list(range(2, 72)), list(range(3, 33))]
feats = [{"input_ids": s} for s in seqs]
clean = dict(DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)(feats))
torch.save(clean, f"{out}/clean.pt")
zero = dict(clean)
cu = torch.tensor([0, 40, 110, 140, 140], dtype=torch.int32)
zero["cu_seq_lens_q"], zero["cu_seq_lens_k"] = cu, cu.clone()
torch.save(zero, f"{out}/zero_length.pt")
torch.save(dict(DataCollatorWithFlattening()(feats)), f"{out}/position_ids.pt")
with open(f"{out}/lengths.txt", "w") as fh:
    fh.write("\n".join(str(n) for n in [1900, 640, 420, 300, 260, 210, 180, 150, 120, 96, 80, 64, 48, 40, 32, 24]))
EOF
: >> "$OUT/exits.txt"
for case in clean zero_length position_ids; do
  case " $PARTS " in *" batches "*) ;; *) break ;; esac
  t0=$(date +%s)
  timeout ${CASE_TIMEOUT:-180} $py -m kernelcheck verify --model qwen3.8-27b --packing --batch "$B/$case.pt" --json \
    > "$OUT/$case.json" 2> "$OUT/$case.err"
  code=$?
  $py -c "import json,sys; from kernelcheck.verify.packing_batch_report import render_text; from kernelcheck.report.packing_batch import BatchSection; from kernelcheck.core.status import Finding; d=json.load(open(sys.argv[1])); print(render_text('qwen3.8-27b', BatchSection.from_json(d), None, [Finding.from_json(f) for f in d['findings']]))" "$OUT/$case.json" > "$OUT/$case.txt" 2>> "$OUT/$case.err"
  echo "$case exit $code in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/exits.txt"
  cat "$OUT/$case.txt"
done
case " $PARTS " in *" payoff "*)
  t0=$(date +%s)
  timeout ${PAYOFF_TIMEOUT:-420} $py -m kernelcheck verify --model qwen3.8-27b --packing --benchmark --json \
    > "$OUT/payoff.json" 2> "$OUT/payoff.err"
  echo "payoff exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/exits.txt"
  $py -c "import json; p=json.load(open('$OUT/payoff.json'))['payoff']; print(json.dumps(p, indent=1))"
  tail -3 "$OUT/payoff.err" ;;
esac
case " $PARTS " in *" payoff_lengths "*)
  t0=$(date +%s)
  timeout ${PAYOFF_TIMEOUT:-420} $py -m kernelcheck verify --model qwen3.8-27b --packing --benchmark \
    --lengths "$B/lengths.txt" --json > "$OUT/payoff_lengths.json" 2> "$OUT/payoff_lengths.err"
  echo "payoff --lengths exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/exits.txt"
  $py -c "import json; p=json.load(open('$OUT/payoff_lengths.json'))['payoff']; print(json.dumps(p, indent=1))"
  $py -m kernelcheck padding "$B/lengths.txt" --batching batch:16 > "$OUT/padding_lengths.txt" 2>&1
  cat "$OUT/padding_lengths.txt" ;;
esac
rm -rf "$B"
