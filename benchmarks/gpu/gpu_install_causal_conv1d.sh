#!/usr/bin/env bash
# On the H200 machine: doctor (fallback) -> kernelcheck install builds causal-conv1d 1.7.0 for sm_90
# from the PyPI sdist and installs fla-core 0.6.0, offline -> doctor again (fast; fla#640 broken in train
# on torch 2.11 + triton 3.6) -> a second install into a fresh folder reuses the wheel (no rebuild).
#
# Carry (git-ignored .carry/, named in the run's `carry`):
#   .carry/causal_conv1d-1.7.0.tar.gz          pip download --no-deps --no-binary :all: --no-build-isolation causal-conv1d==1.7.0 -d .carry
#   .carry/fla_core-0.6.0-py3-none-any.whl     pip download --no-deps fla-core==0.6.0 -d .carry
#   .carry/einops-*.whl (optional: the image has einops)
# Run from the repo root:   bash benchmarks/gpu/gpu_install_causal_conv1d.sh
# Writes logs and JSON to $OUT (default out/gpu-install). Budget: ~8 min, most of it the sm_90 compile
# (426 s on 16 cores: measurement record 2026-12-02-h200-install-causal-conv1d-7772336); run it with timeout_s=600.
set -uo pipefail
OUT=${OUT:-out/gpu-install}
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/kc-site}
SITE2=${SITE2:-/tmp/kc-site2}
WH=${WH:-/tmp/kc-wheelhouse}
MODEL=qwen3.8-27b
SDIST=${SDIST:-.carry/causal_conv1d-1.7.0.tar.gz}
# Rehearsal on a CPU machine: KC_EXTRA="--arch 9.0" SDIST=<a tiny test sdist> PYTHON=<CUDA-torch venv python>
KC_EXTRA=${KC_EXTRA:-}
mkdir -p "$OUT" "$WH" "$SITE"
rm -rf "$SITE2"
cp .carry/fla_core-*.whl "$WH"/
cp .carry/einops-*.whl "$WH"/ 2>/dev/null || true
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export KERNELCHECK_OFFLINE=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 1))"; }

{
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || echo "no nvidia-smi"
  echo "nproc $(nproc)"; free -g | head -2
  $PY -c "import torch, triton, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  nvcc --version | tail -2
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "== 1. doctor before (expect FALLBACK, exit 3)"
$PY -m kernelcheck doctor --model $MODEL --mode infer > "$OUT/doctor_before_infer.txt"
echo "doctor before (infer) exit $?" | tee "$OUT/doctor_before.exit"
grep -E "FALLBACK|FAST|BROKEN|verdict" "$OUT/doctor_before_infer.txt"

echo "== 2. install (train): causal-conv1d built for sm_90 from the sdist, fla-core from the wheelhouse"
echo "   the install ends with doctor in a fresh process: expect causal-conv1d FAST and fla#640 BROKEN (exit 4)"
t0=$(now)
$PY -m kernelcheck install --model $MODEL --mode train --source build --sdist "$SDIST" \
  --wheelhouse "$WH" --offline --target "$SITE" $KC_EXTRA 2>&1 | tee "$OUT/install1.txt"
rc1=${PIPESTATUS[0]}
t1=$(now)
echo "install 1 exit $rc1 (expect 4: fla#640 in train mode on triton 3.6), $(secs $t0 $t1) s" | tee "$OUT/install1.summary"
ls -la "$WH" "$WH"/logs > "$OUT/wheelhouse.txt" 2>&1
cp "$WH"/logs/*.log "$OUT"/ 2>/dev/null
cp "$WH"/*.kernelcheck.json "$OUT"/ 2>/dev/null
cp "$SITE"/.kernelcheck-manifest.json "$OUT"/manifest.json 2>/dev/null
command -v cuobjdump >/dev/null && cuobjdump --list-elf "$SITE"/causal_conv1d_cuda*.so > "$OUT/cuobjdump.txt" 2>&1

echo "== 3. doctor after, infer mode (expect every function FAST, exit 0)"
$PY -m kernelcheck doctor --model $MODEL --mode infer > "$OUT/doctor_after_infer.txt"
echo "doctor after (infer) exit $?" | tee "$OUT/doctor_after.exit"
grep -E "FALLBACK|FAST|BROKEN|verdict" "$OUT/doctor_after_infer.txt"

echo "== 4. second install (infer) into a fresh folder: reuses the built wheel, no compile (expect exit 0)"
t2=$(now)
PYTHONPATH="$SITE2:$PWD" $PY -m kernelcheck install --model $MODEL --mode infer \
  --wheelhouse "$WH" --offline --target "$SITE2" $KC_EXTRA 2>&1 | tee "$OUT/install2.txt"
rc2=${PIPESTATUS[0]}
t3=$(now)
echo "install 2 exit $rc2, $(secs $t2 $t3) s; compile lines: $(grep -cE '^ +\[[0-9]+/[0-9]+\]' "$OUT/install2.txt")" | tee "$OUT/install2.summary"

python3 - "$OUT" <<'EOF'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
s1 = (out / "install1.summary").read_text(); s2 = (out / "install2.summary").read_text()
side = [p for p in out.glob("*.kernelcheck.json")]
built = json.loads(side[0].read_text()) if side else {}
res = {"install1": s1.strip(), "install2": s2.strip(), "build_seconds": built.get("seconds"),
       "max_jobs": built.get("max_jobs"), "so_arches": built.get("so_arches"),
       "doctor_before": (out / "doctor_before.exit").read_text().strip(),
       "doctor_after": (out / "doctor_after.exit").read_text().strip()}
(out / "summary.json").write_text(json.dumps(res, indent=2))
print(json.dumps(res, indent=2))
EOF
