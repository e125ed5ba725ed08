# Sourced by the GPU-machine routines (after `cd` to the repository root): where results go ($OUT), the wheelhouse
# ($WH, what prepare_gpu_wheelhouse.sh carried), the kernels' --target folder ($SITE), offline Hub and kernelcheck,
# one Triton cache; `kc_site` installs fla-core 0.6.0, causal-conv1d 1.7.0 and tilelang 0.1.15 (with what they
# import) from $WH into $SITE unless PYTHONPATH=$SITE:$PWD imports them already. The caller sets PYTHONPATH.
OUT=${OUT:-/tmp/kc-out}
mkdir -p "$OUT"
WH=${WH:-/tmp/kcwh}
SITE=${SITE:-/tmp/site}
py=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 KERNELCHECK_OFFLINE=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/kc-triton}

kc_site() {
  if ! PYTHONPATH="$SITE:$PWD" $py -c "import fla, causal_conv1d, tilelang" 2>/dev/null; then
    mkdir -p "$SITE"
    $py -m pip install -q --no-index --no-deps --no-compile --target "$SITE" $WH/fla_core-0.6.0-*.whl \
      $WH/einops-*.whl $WH/causal_conv1d-1.7.0-*.whl $WH/tilelang-0.1.15-*.whl $WH/apache_tvm_ffi-0.1.12-*.whl \
      $WH/torch_c_dlpack_ext-*.whl $WH/z3_solver-*.whl > "$OUT/site.log" 2>&1 || tail -3 "$OUT/site.log"
  fi
}
