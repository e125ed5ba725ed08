#!/usr/bin/env bash
# The H200 differential: for each perturbation a production image often has, doctor's verdict,
# verify's verdict and the truth (benchmarks/gpu/gpu_truth.py: a real tiny Qwen3.5 loaded with from_pretrained,
# one train step and a prefill + cached decode, what ran, crash or not), side by side in one run.
#
# Prepare here (CPU machine): bash benchmarks/gpu/prepare_gpu_wheelhouse.sh .carry/wh, then the 5.25 stack and the
# perturbation wheels into .carry/wh/part4 (bash benchmarks/gpu/prepare_differential.sh). Carry the parts across
# in calls that each leave them in /tmp/kcwh on the warm machine (64 MiB a call):
#   run(carry=[".carry/wh/part1"], command="mkdir -p /tmp/kcwh && cp .carry/wh/part1/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part2"], command="cp .carry/wh/part2/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part3", ".carry/wh/part4"], command="cp -r .carry/wh/part3/* .carry/wh/part4 /tmp/kcwh/ \
#       && ROWS=all bash benchmarks/gpu/gpu_differential.sh")
# Rows (ROWS="a b c" picks some; nvcc_hidden runs last, alone, since it hides /usr/local/cuda for the machine):
#   stock         the image as it is (no kernel packages: FALLBACK, with the fallback-cost finding)
#   baseline      fla-core 0.6.0, causal-conv1d 1.7.0, tilelang 0.1.15 + apache-tvm-ffi 0.1.12 (what install puts)
#   no_tilelang   without tilelang
#   tvm_outside   apache-tvm-ffi 0.1.13 (outside tilelang 0.1.15's window)
#   fla_tilelang0 FLA_TILELANG=0
#   no_conv       without causal-conv1d
#   fla052        fla-core 0.5.2 instead of 0.6.0
#   t525_offline  transformers 5.25.0 + kernels 0.19.1, HF_HUB_OFFLINE=1, empty HF cache
#   t525_nohub    the same with USE_HUB_KERNELS=0
#   cuda_home_empty baseline, nvcc on PATH, CUDA_HOME naming a folder without bin/nvcc (tilelang compiles with
#                 $CUDA_HOME/bin/nvcc only; fla counts PATH: rule tilelang-jit-cuda-home-no-nvcc)
#   nvcc_hidden   baseline with the CUDA toolkit hidden (no nvcc)
#   t525_load_llama / t525_load_qwen35   transformers 5.25.0 + kernels 0.19.1 alone (no kernel package),
#                 HF_HUB_OFFLINE=1, an empty Hub cache per load: a tiny llama / qwen3_5 built from its config, saved,
#                 loaded with from_pretrained (plain, then .to(cuda); and device_map=cuda), one train step
#                 (benchmarks/hub_offline_load.py): does the load raise? The proof for doctor's CUDA prediction
#                 (hub-not-listable). Each: load-plain.json, load-device_map.json, doctor-cuda.json/.rc,
#                 doctor-cpu.json/.rc. Only these rows need only the 5.25 wheels: T525=DIR names a flat folder of
#                 them (default part4 under $WH; an absolute folder works), e.g.
#                 T525=$PWD/.carry/t525 ROWS="t525_load_llama t525_load_qwen35" bash benchmarks/gpu/gpu_differential.sh
#   t525_load_gpt2 / t525_load_vision   the same for a tiny gpt2 (its NewGELU maps to kernels-community/activation
#                 for INFERENCE only: a device_map load raises, a plain load then .to(cuda) trains) and, replay and
#                 doctor only, the qwen3_5_vision tower. Every t525_load_* row also writes replay-train.json /
#                 replay-infer.json (hub_offline_load.py --replay on this GPU: each repository kernelize resolves and
#                 what it raised, beside doctor's list "predicted") and doctor-cuda-infer.json/.rc.
# Each row: truth.json, doctor-train.json, doctor-infer.json, verify-train.json, verify-infer.json (+ .err);
# summary.md; everything tarred into $OUT/differential.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
WH=${WH:-/tmp/kcwh}
RES=${RES:-/tmp/diff}
S=${S:-/tmp/s}
PY=${PYTHON:-python3}
MODEL=/tmp/tiny-q35
mkdir -p "$RES" "$S"
export PYTHONUNBUFFERED=1 KERNELCHECK_OFFLINE=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
t0=$(date +%s)

site() {  # site NAME WHEEL-GLOB...
  local name=$1; shift
  [ -d "$S/$name" ] && return 0
  local files=()
  for g in "$@"; do case $g in /*) files+=( $g ) ;; *) files+=( $WH/$g ) ;; esac; done
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S/$name" "${files[@]}" \
    > "$RES/site-$name.log" 2>&1 || { echo "site $name failed"; tail -3 "$RES/site-$name.log"; }
}
ROWS=${ROWS:-all}
[ "$ROWS" = all ] && ROWS="stock baseline no_tilelang tvm_outside fla_tilelang0 no_conv fla052 t525_offline t525_nohub cuda_home_empty t525_load_llama t525_load_qwen35 t525_load_gpt2 t525_load_vision nvcc_hidden"
T525=${T525:-part4}  # under $WH, or an absolute folder
site t525 "$T525/transformers-5.25.0-*.whl" "$T525/kernels-0.19.1-*.whl" "$T525/huggingface_hub-*.whl" \
  "$T525/tomlkit-*.whl" "$T525/hf_xet-*.whl" "$T525/httpx2-*.whl" "$T525/httpcore2-*.whl" "$T525/truststore-*.whl" \
  "$T525/idna-*.whl" "$T525/anyio-*.whl" "$T525/h11-*.whl" "$T525/click-*.whl"
if [ -n "$(for r in $ROWS; do case $r in t525_load_*) ;; *) echo "$r" ;; esac; done)" ]; then
  site base "fla_core-0.6.0-*.whl" "einops-*.whl"
  site cc "causal_conv1d-1.7.0-*.whl"
  site tl "tilelang-0.1.15-*.whl" "apache_tvm_ffi-0.1.12-*.whl" "torch_c_dlpack_ext-*.whl" "z3_solver-*.whl"
  site tvm13 "part4/pert/apache_tvm_ffi-0.1.13-*.whl"
  site fla052 "part4/pert/fla_core-0.5.2-*.whl"
  [ -f $MODEL/config.json ] || PYTHONPATH=$S/base $PY benchmarks/gpu/gpu_truth.py --model-dir $MODEL --save-only
fi
echo "sites ready in $(( $(date +%s) - t0 )) s"; du -sh $S/* 2>/dev/null | tr '\n' ' '; echo

row_env() {  # prints "PYTHONPATH EXTRA-ENV" for a row
  case $1 in
    stock) echo "/nonexistent" ;;
    baseline|nvcc_hidden) echo "$S/tl:$S/cc:$S/base" ;;
    no_tilelang) echo "$S/cc:$S/base" ;;
    tvm_outside) echo "$S/tvm13:$S/tl:$S/cc:$S/base" ;;
    fla_tilelang0) echo "$S/tl:$S/cc:$S/base FLA_TILELANG=0" ;;
    no_conv) echo "$S/tl:$S/base" ;;
    fla052) echo "$S/fla052:$S/tl:$S/cc:$S/base" ;;
    t525_offline) echo "$S/t525:$S/tl:$S/cc:$S/base HF_HUB_OFFLINE=1 HF_HOME=/tmp/hf-empty" ;;
    t525_nohub) echo "$S/t525:$S/tl:$S/cc:$S/base HF_HUB_OFFLINE=1 HF_HOME=/tmp/hf-empty USE_HUB_KERNELS=0" ;;
    cuda_home_empty) echo "$S/tl:$S/cc:$S/base CUDA_HOME=/tmp/cuda-empty" ;;
  esac
}

load_row() {  # t525_load_<model>: does from_pretrained raise under 5.25 + kernels 0.19.1, offline, empty cache?
  local row=$1 d=$RES/$1 mt folder r0
  case $row in t525_load_llama) mt=llama ;; t525_load_qwen35) mt=qwen3_5 ;; t525_load_gpt2) mt=gpt2 ;;
    t525_load_vision) mt=qwen3_5_vision ;; esac
  folder=/tmp/tiny-$mt; mkdir -p "$d"; r0=$(date +%s)
  local base=(env "PYTHONPATH=$S/t525:$PWD" HF_HUB_OFFLINE=1 "KERNELCHECK_HOME=$d/kchome")
  # the load's kernelize replayed on this GPU (meta model, its real capability): every repository it resolves,
  # what each raised, and doctor's list (hub.prediction.load_repositories) in the same JSON
  local cap; cap=$($PY -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null || echo 9.0)
  for mode in train infer; do
    "${base[@]}" HF_HOME=$(mktemp -d) timeout 300 $PY benchmarks/hub_offline_load.py --model-type $mt --replay \
      --device cuda --capability $cap --mode $mode > "$d/replay-$mode.json" 2> "$d/replay-$mode.err"
  done
  if [ $mt = qwen3_5_vision ]; then  # a tower is not a causal LM: the replay and doctor only
    "${base[@]}" HF_HOME=$(mktemp -d) timeout 300 $PY -m kernelcheck doctor --model $mt --mode infer --device cuda \
      --json > "$d/doctor-cuda.json" 2> "$d/doctor-cuda.err"; echo $? > "$d/doctor-cuda.rc"
    echo "$row done in $(( $(date +%s) - r0 )) s: doctor cuda=$(cat "$d/doctor-cuda.rc")"; return
  fi
  [ -f $folder/config.json ] || "${base[@]}" HF_HOME=$(mktemp -d) $PY benchmarks/hub_offline_load.py --model-type $mt \
    --folder $folder --save-only > "$d/save.json" 2> "$d/save.err"
  for load in plain device_map; do
    "${base[@]}" HF_HOME=$(mktemp -d) timeout 300 $PY benchmarks/hub_offline_load.py --model-type $mt --folder $folder \
      --load $load --device cuda > "$d/load-$load.json" 2> "$d/load-$load.err"
  done
  for dev in cuda cpu; do
    "${base[@]}" HF_HOME=$(mktemp -d) timeout 300 $PY -m kernelcheck doctor --model $folder --mode train --device $dev \
      --json > "$d/doctor-$dev.json" 2> "$d/doctor-$dev.err"; echo $? > "$d/doctor-$dev.rc"
  done
  "${base[@]}" HF_HOME=$(mktemp -d) timeout 300 $PY -m kernelcheck doctor --model $folder --mode infer --device cuda \
    --json > "$d/doctor-cuda-infer.json" 2> "$d/doctor-cuda-infer.err"; echo $? > "$d/doctor-cuda-infer.rc"
  echo "$row done in $(( $(date +%s) - r0 )) s:" $(cat "$d"/load-*.json | $PY -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(r["load"], "loaded=%s step_ok=%s" % (r["loaded"], r["step_ok"]), r["load_error"] or r["step_error"] or "")') \
    "doctor cuda=$(cat "$d/doctor-cuda.rc") cpu=$(cat "$d/doctor-cpu.rc")"
}

run_row() {
  local row=$1 spec pp extra d
  spec=$(row_env "$row"); pp=${spec%% *}; extra=""; [ "$spec" != "$pp" ] && extra=${spec#* }
  d=$RES/$row; mkdir -p "$d"
  # each row its own TileLang cache: a kernel compiled by another row would hide a JIT that cannot run here
  local envs=(env "PYTHONPATH=$pp:$PWD" "KERNELCHECK_HOME=$d/kchome" "TILELANG_CACHE_DIR=$d/tlcache" $extra)
  [ "$row" = cuda_home_empty ] && { mkdir -p /tmp/cuda-empty/bin; envs+=("PATH=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"):$PATH"); }
  [ "$row" = nvcc_hidden ] && envs+=("PATH=$(echo "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:)")
  local r0; r0=$(date +%s)
  "${envs[@]}" timeout 300 $PY benchmarks/gpu/gpu_truth.py --model-dir $MODEL --out "$d/truth.json" > "$d/truth.out" 2> "$d/truth.err"
  for mode in train infer; do
    "${envs[@]}" timeout 300 $PY -m kernelcheck doctor --model $MODEL --mode $mode --json > "$d/doctor-$mode.json" \
      2> "$d/doctor-$mode.err"; echo $? > "$d/doctor-$mode.rc"
    "${envs[@]}" timeout 400 $PY -m kernelcheck verify --model $MODEL --mode $mode --json > "$d/verify-$mode.json" \
      2> "$d/verify-$mode.err"; echo $? > "$d/verify-$mode.rc"
  done
  echo "$row done in $(( $(date +%s) - r0 )) s"
}

par=""; last=""
for r in $ROWS; do if [ "$r" = nvcc_hidden ]; then last=nvcc_hidden; else par="$par $r"; fi; done
for r in $par; do case $r in t525_load_*) load_row "$r" & ;; *) run_row "$r" & ;; esac; done
wait
if [ -n "$last" ]; then
  mkdir -p /tmp/hidden-cuda; hidden=()
  for c in /usr/local/cuda /usr/local/cuda-*; do [ -e "$c" ] && mv "$c" /tmp/hidden-cuda/ && hidden+=("$(basename "$c")"); done
  hash -r; PATH=$(echo "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:) command -v nvcc && echo "nvcc still visible"
  run_row nvcc_hidden
  for c in "${hidden[@]}"; do mv "/tmp/hidden-cuda/$c" /usr/local/; done
fi

$PY benchmarks/differential_table.py "$RES" > "$RES/summary.md" 2>&1; cat "$RES/summary.md"
for f in "$RES"/t525_load_*/load-*.json; do [ -f "$f" ] && echo "$f: $(head -c 600 "$f")"; done
echo "== done in $(( $(date +%s) - t0 )) s"
tar czf "${OUT:-/tmp}/differential.tgz" -C "$RES" --exclude=kchome --exclude=tlcache .
