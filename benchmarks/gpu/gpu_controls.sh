#!/usr/bin/env bash
# Every live check with its controls, on the GPU machine (torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0,
# Python 3.12, no network) with the real kernels: fla-core 0.6.0, causal-conv1d 1.7.0 (sm_90), tilelang 0.1.15 +
# apache-tvm-ffi 0.1.12, installed into /tmp/site from the wheelhouse $WH (default /tmp/kcwh) as
# benchmarks/gpu/gpu_packing_batch.sh does.
#
# Carry (prepare on the CPU machine: bash benchmarks/gpu/prepare_gpu_wheelhouse.sh .carry/wh), three calls of 64 MiB:
#   run(carry=[".carry/wh/part1"], command="mkdir -p /tmp/kcwh && cp .carry/wh/part1/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part2"], command="cp .carry/wh/part2/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part3"], command="cp .carry/wh/part3/* /tmp/kcwh/ && bash benchmarks/gpu/gpu_controls.sh packing")
#   run(command="bash benchmarks/gpu/gpu_controls.sh trace")     # same warm machine: each part its own 10 minutes
#   run(command="bash benchmarks/gpu/gpu_controls.sh step")
#   run(command="bash benchmarks/gpu/gpu_controls.sh compile")
#   run(command="bash benchmarks/gpu/gpu_controls.sh ratios")
# (skip the copies when /tmp/site already imports fla, causal_conv1d and tilelang on a warm machine.)
#
# Parts and what each row must show (the exit code first; every packing row prints its JSON's `controls`):
#   packing  verify --model qwen3.8-27b --packing --batch on DataCollatorWithFlattening over 40 + 70 + 30 tokens,
#            bf16 on the GPU, each batch in its own process:
#     position_ids   the collator's defaults (TRL padding_free): exit 4, packing-kernel-gets-no-boundary for
#                    chunk_gated_delta_rule and causal_conv1d_fn (the measured mix was under the old fixed 0.05);
#     removed        the clean batch with its boundaries removed from the kernels' keys (cu_seq_lens_q/k [0, 140],
#                    seq_idx all 0; position_ids still restart): exit 4, packing-kernel-misses-boundary;
#     cu_only        return_flash_attn_kwargs=True without seq_idx: exit 4, the conv gets no boundary;
#     seq_idx_only   return_seq_idx=True without cu_seq_lens: exit 4, the GDN kernel gets no boundary;
#     long_clean     150 + 130 tokens (several of fla's 64-token chunks), cu_seq_lens + seq_idx: exit 0;
#     clean          return_flash_attn_kwargs=True, return_seq_idx=True: exit 0, controls.decided true, the
#                    negative control `clean` under the threshold and the positive one (boundaries removed) above;
#                    a `packing-control-cannot-decide` (exit 3) instead would say bf16 at this shape cannot tell.
#   trace    a CPU-only trace (activities=[CPU], with_stack=True) of a tiny Qwen3.5 training step recorded on this
#            GPU machine: `torch_path` without fla/causal-conv1d on the path (the stacks show
#            torch_chunk_gated_delta_rule): exit 3, trace-cpu-only-torch-path; `fla` with them: no torch path in
#            the stacks, exit 0 (READY only as far as a CPU-only trace can tell); `cuda` the same step recorded
#            with ProfilerActivity.CUDA and fla: fla and causal-conv1d kernels in the trace (exit 3,
#            launch-bound, at this tiny step).
#   step     verify --model qwen3.8-27b --step --shape tiny --tokens 256 twice: `same` without fla/causal-conv1d (both paths the
#            torch code): step.same_path true, no speedup, projections with the same-path error, triton_cache
#            state none; `fla` with them: a speedup and projections as before. Both print step.controls: the
#            injected 50 % slowdown detected, and `decided` true only for `fla` (else step-control-cannot-decide).
#   ratios   the speedup's controls on the GPU: verify --shape full --benchmark --tokens 8192 --mode train (with
#            fla): each pass's controls detected (aa_ratio near 1, measured_slowdown near expected_slowdown) and
#            `decided` true with the speedup (about 6x forward, 11-15x forward+backward); then --step --shape tiny
#            with KERNELCHECK_CONTROL_SLOWDOWN=1: the 1 % delay missed, step-control-cannot-decide (fallback),
#            exit 3, no speedup.
#   compile  doctor --model qwen3.8-27b --mode train (with fla): compile-graph-breaks-static, its reference (how
#            fla 0.6.0 wraps chunk_gated_delta_rule: its own @torch.compiler.disable and the dispatch) and fix;
#            then verify --model qwen3.8-27b --compile --shape full (COMPILE_SHAPE=tiny for a quick one, inductor)
#            on the same machine: its graph breaks per pass and reasons, and the implementations bound (so a
#            0-break run can be told from one where fla did not run). Both are printed side by side in compile_vs_static.txt,
#            with each pass's fused_ops (the positive control): chunk_gated_delta_rule's fast implementation
#            reached (traced/runs above 0, compiler_disabled true) and, with 0 breaks, compile-static-contradicted;
#            compile-op-not-exercised would say the compiled run never reached fla.
# Writes under $OUT (at most 8 files per part): versions.txt, exits.txt, <part>.txt (every row's output), and a
# few JSON files.
set -uo pipefail
cd "$(dirname "$0")/../.."
. benchmarks/gpu/site.sh
WITH="$SITE:$PWD"      # the real kernels importable
WITHOUT="$PWD"         # transformers' torch path
kc_site
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  PYTHONPATH=$WITH $py -c "import torch, triton, transformers, fla, causal_conv1d; print(torch.__version__, triton.__version__, transformers.__version__, 'fla', fla.__version__, 'causal_conv1d', causal_conv1d.__version__)"
  git log -1 --format='kernelcheck %h %s' 2>/dev/null
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"
: >> "$OUT/exits.txt"
PARTS=${*:-packing trace step compile ratios}
B=$(mktemp -d)

row() {  # row NAME PYTHONPATH OUTFILE CMD...: run one case in its own process, record its exit code
  local name=$1 pp=$2 out=$3; shift 3
  local t0; t0=$(date +%s)
  PYTHONPATH=$pp timeout ${CASE_TIMEOUT:-240} "$@" > "$out" 2> "$out.err"
  local code=$?
  echo "$name exit $code in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/exits.txt"
  return 0
}

case " $PARTS " in *" packing "*)
  PYTHONPATH=$WITH $py - "$B" <<'EOF'
import sys, torch
from transformers import DataCollatorWithFlattening as C
out = sys.argv[1]
seqs = [list(range(1, 41)), list(range(2, 72)), list(range(3, 33))]
long = [[i * 7 % 100 + 1 for i in range(150)], [i * 3 % 100 + 1 for i in range(130)]]
f = lambda s: [{"input_ids": x} for x in s]
clean = dict(C(return_flash_attn_kwargs=True, return_seq_idx=True)(f(seqs)))
cu = torch.tensor([0, 140], dtype=torch.int32)
removed = {**clean, "cu_seq_lens_q": cu, "cu_seq_lens_k": cu.clone(), "max_length_q": 140, "max_length_k": 140,
           "seq_idx": torch.zeros(1, 140, dtype=torch.int32)}
for name, b in {"position_ids": dict(C()(f(seqs))), "removed": removed,
                "cu_only": dict(C(return_flash_attn_kwargs=True)(f(seqs))),
                "seq_idx_only": dict(C(return_seq_idx=True)(f(seqs))),
                "long_clean": dict(C(return_flash_attn_kwargs=True, return_seq_idx=True)(f(long))),
                "clean": clean}.items():
    torch.save(b, f"{out}/{name}.pt")
EOF
  : > "$OUT/packing.txt"
  for c in position_ids removed cu_only seq_idx_only long_clean clean; do
    row "packing:$c" "$WITH" "$B/$c.json" $py -m kernelcheck verify --model qwen3.8-27b --packing --batch "$B/$c.pt" --json
    { echo "== $c: $(tail -1 "$OUT/exits.txt")"
      $py -c "
import json, sys
d = json.load(open(sys.argv[1]))
print('findings:', [f['id'] for f in d['findings']])
print('reach:', {r['function']: r['passed'] for r in d['reach']})
print('controls:', json.dumps(d.get('controls')))
for s in d['segments']:
    print('  segment', s['index'], s['start'], s['end'], 'rel', s['output_rel_l2'], s['grad_rel_l2'],
          'token', s['token_distance'], '@', s['worst_token'], 'WRONG' if s['wrong'] else 'ok')
" "$B/$c.json" 2>&1 || tail -5 "$B/$c.json.err"
    } >> "$OUT/packing.txt"
  done
  cp "$B/position_ids.json" "$B/clean.json" "$OUT/" 2>/dev/null
  cat "$OUT/packing.txt" ;;
esac

case " $PARTS " in *" trace "*)
  cat > "$B/record.py" <<'EOF'
import sys, torch
from transformers import AutoModelForCausalLM, Qwen3_5TextConfig
from torch.profiler import ProfilerActivity, profile
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if sys.argv[2] == "cuda" else [])
cfg = Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"])
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(cfg).to("cuda", torch.bfloat16)
x = torch.randint(0, 128, (1, 256), device="cuda")
model(x, labels=x).loss.backward()  # warm-up (Triton compiles outside the recording)
torch.cuda.synchronize()
with profile(activities=acts, with_stack=True) as prof:
    model(x, labels=x).loss.backward()
    torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
EOF
  : > "$OUT/trace.txt"
  for c in torch_path fla cuda; do
    pp=$WITH; [ $c = torch_path ] && pp=$WITHOUT
    acts=cpu; [ $c = cuda ] && acts=cuda
    PYTHONPATH=$pp $py "$B/record.py" "$B/$c.json" $acts > "$B/$c.rec" 2>&1 || tail -5 "$B/$c.rec"
    row "trace:$c" "$WITHOUT" "$B/$c.out" $py -m kernelcheck trace "$B/$c.json" --json
    { echo "== $c: $(tail -1 "$OUT/exits.txt")"
      $py -c "
import json, sys
d = json.load(open(sys.argv[1]))
print('verdict', d['verdict'], 'cpu_only', d['trace']['cpu_only'])
for f in d['findings']:
    print(' ', f['severity'], f['id'], '|', (f.get('fix') or '')[:100])
" "$B/$c.out" 2>&1 || tail -5 "$B/$c.out.err"
    } >> "$OUT/trace.txt"
  done
  cat "$OUT/trace.txt" ;;
esac

case " $PARTS " in *" step "*)
  : > "$OUT/step.txt"
  for c in same fla; do
    pp=$WITH; [ $c = same ] && pp=$WITHOUT
    CASE_TIMEOUT=280 row "step:$c" "$pp" "$B/step_$c.json" $py -m kernelcheck verify --model qwen3.8-27b --step --shape tiny --tokens 256 --json
    { echo "== $c: $(tail -1 "$OUT/exits.txt")"
      $py -c "
import json, sys
d = json.load(open(sys.argv[1]))
s = d['step']
print('same_path', s.get('same_path'), 'speedup', s.get('speedup'), 'projected', s['projection'].get('projected_speedup'))
print('fast', s['projection']['fast'].get('error') or s['projection']['fast'].get('projected_step_ms'))
print('triton_cache', s['cost']['triton_cache']['state'])
print('controls', json.dumps(s.get('controls')))
print('control findings', [(f['id'], f['severity']) for f in d['findings'] if 'control' in f['id']])
print('\n'.join(d['live']['lines']))
" "$B/step_$c.json" 2>&1 || tail -5 "$B/step_$c.json.err"
    } >> "$OUT/step.txt"
  done
  cp "$B/step_same.json" "$OUT/" 2>/dev/null
  cat "$OUT/step.txt" ;;
esac

case " $PARTS " in *" ratios "*)
  : > "$OUT/ratios.txt"
  CASE_TIMEOUT=300 row "ratios:benchmark" "$WITH" "$B/bench.json" $py -m kernelcheck verify --model qwen3.8-27b --shape full --benchmark --tokens 8192 --mode train --json
  KERNELCHECK_CONTROL_SLOWDOWN=1 CASE_TIMEOUT=280 row "ratios:step_slowdown_1pct" "$WITH" "$B/step_1pct.json" $py -m kernelcheck verify --model qwen3.8-27b --step --shape tiny --tokens 256 --json
  $py -c "
import json, sys
b = json.load(open(sys.argv[1]))['live'].get('benchmark') or {}
for n, p in (b.get('passes') or {}).items():
    print('benchmark', n, 'speedup', p.get('speedup'), 'controls', json.dumps(p.get('controls')))
s = json.load(open(sys.argv[2]))
print('step 1% slowdown: speedup', s['step'].get('speedup'), 'controls', json.dumps(s['step'].get('controls')))
print('step findings', [(f['id'], f['severity']) for f in s['findings'] if 'control' in f['id']])
" "$B/bench.json" "$B/step_1pct.json" >> "$OUT/ratios.txt" 2>&1
  cp "$B/bench.json" "$OUT/" 2>/dev/null
  cat "$OUT/ratios.txt" ;;
esac

case " $PARTS " in *" compile "*)
  row "compile:doctor" "$WITH" "$B/doctor.json" $py -m kernelcheck doctor --model qwen3.8-27b --mode train --json
  CASE_TIMEOUT=420 row "compile:verify" "$WITH" "$B/compile.json" $py -m kernelcheck verify --model qwen3.8-27b --compile --shape ${COMPILE_SHAPE:-full} --json
  $py -c "
import json, sys
doc = json.load(open(sys.argv[1]))
st = [f for f in doc['findings'] if f['id'].startswith('compile-')]
print('doctor (static):')
for f in st:
    print(' ', f['id'], '|', f['message']); print('   fix:', f['fix']); print('   ref:', f['reference'])
v = json.load(open(sys.argv[2]))
sec = v.get('compiled') or {}
print('verify --compile (measured):', sec.get('backend'), sec.get('shape'), sec.get('device'))
for p in sec.get('passes', []):
    print(' ', p['pass'], 'graphs', p.get('graphs'), 'breaks', p.get('graph_breaks'),
          [(b['count'], b['reason'][:80], b['where']) for b in p.get('breaks', [])])
    print('   parts', [(r['part'], r['calls'], r['eager_calls']) for r in p.get('parts', [])])
    print('   fused_ops (the positive control)', [(o['function'], o['fast'], o['compiler_disabled'], o['calls'],
          o['traced'], o['runs'], o['exercised']) for o in p.get('fused_ops', [])])
for f in v['findings']:
    if f['id'] in ('compile-op-not-exercised', 'compile-static-contradicted'):
        print(' ', f['severity'], f['id'], '|', f['message'])
print('verify findings:', [f['id'] for f in v['findings']])
print('bound:', [(f['name'], f.get('provider'), f.get('status')) for f in v.get('functions', [])])
" "$B/doctor.json" "$B/compile.json" > "$OUT/compile_vs_static.txt" 2>&1
  tail -3 "$B/compile.json.err" >> "$OUT/compile_vs_static.txt"
  cp "$B/compile.json" "$OUT/" 2>/dev/null
  cat "$OUT/compile_vs_static.txt" ;;
esac
rm -rf "$B"
