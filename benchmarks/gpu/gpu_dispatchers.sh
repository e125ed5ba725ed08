#!/usr/bin/env bash
# What the run-time dispatchers choose, on the GPU machine (torch 2.11.0+cu130, triton 3.6.0, Python 3.12, nvcc 13.0
# in /usr/local/cuda, no network): for each row, doctor (with --jit-probe) and verify, and where a job's own load
# matters the truth program; doctor's provider per function, its JIT proof and its torch.compile answer against
# what really ran.
#
# Prepare here (CPU machine): bash benchmarks/gpu/prepare_gpu_wheelhouse.sh .carry/wh; bash benchmarks/gpu/prepare_differential.sh
# (parts 1-4, as for gpu_differential.sh); bash benchmarks/gpu/prepare_dispatchers.sh (part5 ~41 MiB: flash-qla 0.1.3,
# nvidia-cuda-nvcc/cccl/runtime/crt 13.0; part6 ~59 MiB: nvidia-nvvm 13.0.88). Carry them in calls that each leave
# them in /tmp/kcwh on the warm machine (64 MiB a call; tilelang's wheel alone is 47 MiB):
#   run(carry=[".carry/wh/part1"], command="mkdir -p /tmp/kcwh && cp .carry/wh/part1/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part2"], command="cp .carry/wh/part2/* /tmp/kcwh/")
#   run(carry=[".carry/wh/part3", ".carry/wh/part4"], command="cp -r .carry/wh/part3/* .carry/wh/part4 /tmp/kcwh/")
#   run(carry=[".carry/wh/part5"], command="cp -r .carry/wh/part5 /tmp/kcwh/ && ROWS='qla_toolkit compile_tiny \
#       compile_full hub525' bash benchmarks/gpu/gpu_dispatchers.sh", timeout_s=600)
#   run(carry=[".carry/wh/part6"], command="cp -r .carry/wh/part6 /tmp/kcwh/ && ROWS='tl_pipnvcc tl_pipnvcc_home \
#       tl_pipcuda_all qla_no_toolkit hub525_no_toolkit' bash benchmarks/gpu/gpu_dispatchers.sh", timeout_s=600)
# Rows (run one after the other: they share the GPU and some time each other):
#   qla_toolkit      fla-core 0.6.0 + tilelang 0.1.15 + causal-conv1d + flash-qla 0.1.3, the toolkit there: FlashQLA
#                    takes the Qwen3.8-27B GDN heads (K = V = 128) forward and backward (verify --shape full)
#   qla_no_toolkit   the same with the toolkit hidden: FlashQLA checks for no nvcc (fla#949 expected)
#   tl_pipnvcc       tilelang[nvcc] from pip (nvidia-cuda-nvcc + nvidia-cuda-cccl in a site), toolkit hidden, nothing
#                    set: what fla's has_usable_nvcc and TileLang find by themselves
#   tl_pipnvcc_home  the same with CUDA_HOME and PATH pointing at pip's nvcc (how a user wires it)
#   tl_pipcuda_all   + nvidia-cuda-runtime, nvidia-cuda-crt, nvidia-nvvm (every piece pip's nvcc lacks), toolkit hidden
#   hub525           transformers 5.25.0 + kernels 0.19.1, HF_HUB_OFFLINE=1, a Hub cache with STAND-IN builds of
#                    kernels-community/fla v3 and mamba-ssm v5 made here (benchmarks/hub_standin_cache.py: the real
#                    builds cannot be fetched without network; pure Python in kernels' layout with the Hub fla's
#                    dispatch files, so what the real Hub kernels do on the GPU is not measured, only what runs where
#                    and what doctor and kernels' get_kernelized_layers say)
#   hub525_no_toolkit the same, toolkit hidden, tilelang installed: doctor's hub-fla-backend-fails (the Hub fla imports
#                    tilelang without an nvcc check); the stand-in cannot show the crash itself
#   compile_tiny     baseline (fla-core 0.6.0 + tilelang + causal-conv1d): verify --compile on the tiny model
#   compile_full     the same on the full Qwen3.8-27B layer shape (inductor)
# Each row: doctor-*.json, verify-*.json (+ .err/.rc), truth.json where run; summary.md (benchmarks/dispatchers_table.py);
# everything tarred into $OUT/dispatchers-<first row>.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
WH=${WH:-/tmp/kcwh}
RES=${RES:-/tmp/dispatch}
S=/tmp/s
PY=${PYTHON:-python3}
MODEL=/tmp/tiny-q35
Q=qwen3.8-27b
mkdir -p "$RES" "$S"
export PYTHONUNBUFFERED=1 KERNELCHECK_OFFLINE=1
t0=$(date +%s)

site() {  # site NAME WHEEL-GLOB...
  local name=$1; shift
  [ -d "$S/$name" ] && return 0
  local files=()
  for g in "$@"; do files+=( $WH/$g ); done
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S/$name" "${files[@]}" \
    > "$RES/site-$name.log" 2>&1 || { echo "site $name failed"; tail -3 "$RES/site-$name.log"; }
}
site base "fla_core-0.6.0-*.whl" "einops-*.whl"
site cc "causal_conv1d-1.7.0-*.whl"
site tl "tilelang-0.1.15-*.whl" "apache_tvm_ffi-0.1.12-*.whl" "torch_c_dlpack_ext-*.whl" "z3_solver-*.whl"
site qla "part5/flash_qla-0.1.3-*.whl"
site pipnvcc "part5/nvidia_cuda_nvcc-*.whl" "part5/nvidia_cuda_cccl-*.whl"
[ -d "$WH/part6" ] && site pipcuda "part5/nvidia_cuda_nvcc-*.whl" "part5/nvidia_cuda_cccl-*.whl" \
  "part5/nvidia_cuda_runtime-*.whl" "part5/nvidia_cuda_crt-*.whl" "part6/nvidia_nvvm-*.whl"
site t525 "part4/transformers-5.25.0-*.whl" "part4/kernels-0.19.1-*.whl" "part4/huggingface_hub-*.whl" \
  "part4/tomlkit-*.whl" "part4/hf_xet-*.whl" "part4/httpx2-*.whl" "part4/httpcore2-*.whl" "part4/truststore-*.whl" \
  "part4/idna-*.whl" "part4/anyio-*.whl" "part4/h11-*.whl" "part4/click-*.whl"
echo "sites ready in $(( $(date +%s) - t0 )) s"
[ -f $MODEL/config.json ] || PYTHONPATH=$S/base $PY benchmarks/gpu/gpu_truth.py --model-dir $MODEL --save-only
if [ ! -d /tmp/hub-standin ]; then
  PYTHONPATH=$S/t525 $PY benchmarks/hub_standin_cache.py /tmp/hub-standin > "$RES/hub-standin.txt" 2>&1 \
    || { echo "stand-in Hub cache failed"; tail -5 "$RES/hub-standin.txt"; }
fi

row_env() {  # prints "PYTHONPATH EXTRA-ENV" for a row
  local pn="$S/pipnvcc/nvidia/cu13" pc="$S/pipcuda/nvidia/cu13"
  case $1 in
    qla_toolkit|qla_no_toolkit) echo "$S/qla:$S/tl:$S/cc:$S/base" ;;
    tl_pipnvcc) echo "$S/pipnvcc:$S/tl:$S/cc:$S/base" ;;
    tl_pipnvcc_home) echo "$S/pipnvcc:$S/tl:$S/cc:$S/base CUDA_HOME=$pn PATH=$pn/bin:$PATH" ;;
    tl_pipcuda_all) echo "$S/pipcuda:$S/tl:$S/cc:$S/base CUDA_HOME=$pc PATH=$pc/bin:$PATH" ;;
    hub525|hub525_no_toolkit) echo "$S/t525:$S/tl:$S/cc:$S/base HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hub-standin" ;;
    compile_tiny|compile_full) echo "$S/tl:$S/cc:$S/base" ;;
  esac
}

kc() {  # kc DIR NAME TIMEOUT ARGS... -> DIR/NAME.json, .err, .rc
  local d=$1 name=$2 limit=$3; shift 3
  "${envs[@]}" timeout "$limit" $PY -m kernelcheck "$@" --json > "$d/$name.json" 2> "$d/$name.err"
  echo $? > "$d/$name.rc"
}

run_row() {
  local row=$1 spec pp extra d
  spec=$(row_env "$row"); pp=${spec%% *}; extra=""; [ "$spec" != "$pp" ] && extra=${spec#* }
  d=$RES/$row; mkdir -p "$d"
  # each row its own caches: a kernel compiled by another row would hide a JIT that cannot run here
  envs=(env "PYTHONPATH=$pp:$PWD" "KERNELCHECK_HOME=$d/kchome" "TILELANG_CACHE_DIR=$d/tlcache"
        "TRITON_CACHE_DIR=$d/triton" $extra)
  case $row in *no_toolkit|tl_pip*) envs+=("PATH=$(echo "${PATH}" | tr ':' '\n' | grep -v /usr/local/cuda | paste -sd:)") ;; esac
  case $row in tl_pipnvcc_home|tl_pipcuda_all) envs+=($extra) ;; esac  # their PATH (pip's nvcc first) wins
  local r0; r0=$(date +%s)
  case $row in
    qla_*|tl_*)
      kc "$d" doctor-train 300 doctor --model $Q --mode train --jit-probe
      kc "$d" doctor-infer 300 doctor --model $Q --mode infer --jit-probe
      kc "$d" verify-full-train 500 verify --model $Q --shape full --mode train ;;
    hub525*)
      "${envs[@]}" timeout 300 $PY tests/programs/gpu_hub_default_truth.py $MODEL > "$d/truth.json" 2> "$d/truth.err"
      kc "$d" doctor-train 300 doctor --model $MODEL --mode train --jit-probe
      kc "$d" doctor-infer 300 doctor --model $MODEL --mode infer
      kc "$d" doctor-q-train 300 doctor --model $Q --mode train
      kc "$d" verify-train 400 verify --model $MODEL --mode train ;;
    compile_tiny) kc "$d" verify-compile 500 verify --model $MODEL --mode train --compile ;;
    compile_full) kc "$d" verify-compile 560 verify --model $Q --shape full --mode train --compile ;;
  esac
  echo "$row done in $(( $(date +%s) - r0 )) s"
}

hide_toolkit() {  # move the CUDA toolkit out of the way for the rows that must not see it
  mkdir -p /tmp/hidden-cuda; hidden=()
  for c in /usr/local/cuda /usr/local/cuda-*; do [ -e "$c" ] && mv "$c" /tmp/hidden-cuda/ && hidden+=("$(basename "$c")"); done
  hash -r
}
show_toolkit() { for c in "${hidden[@]}"; do mv "/tmp/hidden-cuda/$c" /usr/local/; done; hidden=(); }

ROWS=${ROWS:-qla_toolkit compile_tiny compile_full hub525 tl_pipnvcc tl_pipnvcc_home tl_pipcuda_all qla_no_toolkit hub525_no_toolkit}
hidden=()
for r in $ROWS; do
  case $r in *no_toolkit|tl_pip*) [ ${#hidden[@]} -eq 0 ] && hide_toolkit ;; *) [ ${#hidden[@]} -gt 0 ] && show_toolkit ;; esac
  run_row "$r"
done
[ ${#hidden[@]} -gt 0 ] && show_toolkit

$PY benchmarks/dispatchers_table.py "$RES" > "$RES/summary.md" 2>&1; cat "$RES/summary.md"
echo "== done in $(( $(date +%s) - t0 )) s"
first=${ROWS%% *}
tar czf "${OUT:-/tmp}/dispatchers-$first.tgz" -C "$RES" --exclude=kchome --exclude=tlcache --exclude=triton .
