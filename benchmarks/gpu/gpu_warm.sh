#!/usr/bin/env bash
# Cold start on the GPU machine (torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0, Python 3.12, nvcc 13.0, no
# network): cold vs warm vs baked cache, side by side in one run, and the cache proof in both directions.
#   cold   a fresh container: empty Triton/TileLang caches and an empty KERNELCHECK_HOME
#   warm   the same command again on the same folders (what a second job on the same node pays)
#   baked  `kernelcheck warm` compiled into a folder first; then a fresh process with only `kernelcheck warm
#          --print-env`'s variables pointing at that folder (the JIT caches and KERNELCHECK_PROOF_DIR, where warm's
#          doctor --jit-probe left the gate's import and JIT-probe proofs), an empty HOME and an empty
#          KERNELCHECK_HOME: what an image that ships it pays. gate also runs the baked verify without --cache-dir
#          (the cache proof's own child left out: what a job's gate that does not re-prove the cache pays) and the
#          baked doctor --jit-probe (the prolog gate: its import proof and both JIT probes found at bake time)
#
# Wheels: .carry/ from benchmarks/gpu/prepare_carry.sh (fla-core 0.6.0, einops, causal-conv1d 1.7.0 cp312 sm_90), and for
# train mode on Hopper with triton 3.6 (fla#640: the gated chunk backward runs on TileLang) the TileLang wheelhouse of
# benchmarks/gpu/prepare_gpu_wheelhouse.sh (.carry/wh/part1..3, 64 MiB per call: carry one part per `install` call; the
# site folder stays on the machine while it is warm). Without TileLang the train gate says BROKEN (fla-640): the
# timings still hold, the first training step cannot run.
#
#   bash benchmarks/gpu/gpu_warm.sh install    # once per carried part (carry .carry/wh/part1, then part2, then part3 + .carry)
#   bash benchmarks/gpu/gpu_warm.sh gate       # verify tiny train: cold, warm, bake, baked       (~5-8 min)
#   bash benchmarks/gpu/gpu_warm.sh proof      # the cache proof both ways on gate's baked folder  (~2-3 min)
#   bash benchmarks/gpu/gpu_warm.sh packing    # verify --packing: cold, warm, bake, baked          (~5-8 min)
#   bash benchmarks/gpu/gpu_warm.sh step       # the job's first training step (full, 8192 tokens)  (~6-8 min)
#
# What proves the point ($OUT/summary.txt, one line per measurement, then the checks):
#   gate:  "baked <= 30 s: PASS" and "cold/baked >= 5: PASS"; baked verify's live triton_cache.compiled == 0;
#          "baked JIT probes found at bake time: PASS" (no probe ran again; gate-baked's static_s is the static check
#          without them) and "baked doctor import proof: baked" (doctor took no import child)
#   proof: doctor --cache-dir: jit-cache-hit for Triton (TileLang: hit or undecided, as warm measured it);
#          manifest driver edited to 575.57.08 -> jit-cache-node-differs "575.57.08 baked, <this node's> here" (no
#          JIT key holds the driver: said, not a miss);
#          manifest ptxas edited -> jit-cache-miss naming ptxas; TRITON_DEFAULT_FP_FUSION=0 (a variable in Triton's
#          key) -> jit-cache-miss predicted, and verify then really compiles (triton_cache.compiled > 0), where
#          without it compiled == 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kc-out}
mkdir -p "$OUT"
SITE=${SITE:-/tmp/kc-warm-site}
WORK=${WORK:-/tmp/kc-warm}
MODEL=${MODEL:-qwen3.8-27b}
mkdir -p "$SITE" "$WORK"
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1
# the JIT caches the machine's own defaults would hold: never used below (every run names its folders)
unset TRITON_CACHE_DIR TILELANG_CACHE_DIR TILELANG_TMP_DIR TORCHINDUCTOR_CACHE_DIR

say() { echo "$*" | tee -a "$OUT/summary.txt"; }

# Every run gets a HOME of its own too (a fresh container's): a JIT that caches outside the variables (under ~) is
# cold in the baked run, and `homes` lists what each run left there.
fresh_env() {  # fresh_env NAME: the variables of a fresh container whose JIT caches are NAME's folders
  mkdir -p "$WORK/$1/userhome"
  echo "HOME=$WORK/$1/userhome TRITON_CACHE_DIR=$WORK/$1/triton TILELANG_CACHE_DIR=$WORK/$1/tilelang TILELANG_TMP_DIR=$WORK/$1/tilelang/tmp KERNELCHECK_HOME=$WORK/$1/home"
}
baked_env() {  # baked_env FOLDER: an empty HOME and KERNELCHECK_HOME, and warm --print-env's lines for FOLDER (JIT
  local home  # caches, KERNELCHECK_PROOF_DIR)
  home=$(mktemp -d "$WORK/home.XXXX")
  echo "HOME=$home KERNELCHECK_HOME=$home/kc $(python3 -m kernelcheck warm --cache-dir "$1" --print-env | tr '\n' ' ')"
}
bake_env() {  # the bake's own fresh HOME (warm points the JITs and KERNELCHECK_HOME into its folder itself)
  local home
  home=$(mktemp -d "$WORK/bakehome.XXXX")
  echo "HOME=$home KERNELCHECK_HOME=$home/kc"
}
homes() {  # what the runs wrote under their HOMEs (caches outside the variables)
  for h in "$WORK"/home.* "$WORK"/*/userhome; do
    [ -d "$h" ] && say "  under HOME $h: $(find "$h" -mindepth 1 -maxdepth 3 | head -8 | tr '\n' ' ')"
  done
}
run() {  # run LABEL LIMIT "ENV..." CMD...: wall seconds and exit to times.tsv, stdout to LABEL.json, stderr to LABEL.err
  local label=$1 limit=$2 vars=$3; shift 3
  local t0 t1
  t0=$(date +%s.%N)
  env $vars timeout "$limit" "$@" > "$OUT/$label.json" 2> "$OUT/$label.err"
  local rc=$?
  t1=$(date +%s.%N)
  local wall
  wall=$(python3 -c "print(round($t1 - $t0, 1))")
  printf '%s\t%s\t%s\n' "$label" "$wall" "$rc" >> "$OUT/times.tsv"
  say "$label: exit $rc in $wall s"
}

install() {
  local wheels
  wheels=$(ls .carry/*.whl .carry/wh/part*/*.whl 2>/dev/null)
  [ -n "$wheels" ] || { echo "nothing in .carry/ (benchmarks/gpu/prepare_carry.sh, prepare_gpu_wheelhouse.sh)"; exit 2; }
  # shellcheck disable=SC2086
  python3 -m pip install --quiet --no-index --no-deps --upgrade --target "$SITE" $wheels || exit 1
  python3 -m compileall -q "$SITE" >/dev/null 2>&1
  python3 -c "import importlib.metadata as m
for d in ('fla-core','causal-conv1d','tilelang','apache-tvm-ffi','z3-solver'):
    try: print(d, m.version(d))
    except Exception: print(d, 'absent')" | tee "$OUT/site.txt"
}

versions() {
  { nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
    python3 -c "import sys, torch, triton, transformers; print(sys.version.split()[0], torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  } > "$OUT/versions.txt" 2>&1
  cat "$OUT/versions.txt"
}

ratios() {  # ratios NAME: cold / warm / baked walls of NAME-*, and the targets for the gate
  python3 - "$OUT/times.tsv" "$1" <<'PY' | tee -a "$OUT/summary.txt"
import sys
rows = {l.split("\t")[0]: float(l.split("\t")[1]) for l in open(sys.argv[1]) if l.strip()}
n = sys.argv[2]
cold, warm, baked = (rows.get(f"{n}-{k}") for k in ("cold", "warm", "baked"))
if None in (cold, warm, baked):
    print(f"{n}: a run is missing"); sys.exit()
print(f"{n}: cold {cold} s, warm {warm} s, baked {baked} s; cold/warm {cold / warm:.1f}x, cold/baked {cold / baked:.1f}x")
if n == "gate":
    print(f"gate: baked <= 30 s: {'PASS' if baked <= 30 else 'FAIL'}; cold/baked >= 5: {'PASS' if cold / baked >= 5 else 'FAIL'}")
PY
}

proofs() {  # proofs LABEL: where a run's import proof and JIT probes came from, and the static check's time
  python3 - "$OUT/$1.json" "$1" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"  {sys.argv[2]}: no JSON:", e); sys.exit()
probes = [f for f in r.get("findings", []) if f["id"].startswith(("jit-probe", "jit-run"))]
baked = [f for f in probes if "bake time" in f["message"]]
timing = (r.get("live") or {}).get("timing") or {}
print(f"  {sys.argv[2]}: static_s {timing.get('static_s')}; import proof {(r.get('import_proof') or {}).get('cache')}; "
      f"JIT probes {len(probes)}, found at bake time {len(baked)}")
if sys.argv[2].endswith(("baked", "baked-plain", "baked-doctor")):
    print(f"  {sys.argv[2]}: baked JIT probes found at bake time: {'PASS' if probes and len(baked) == len(probes) else 'FAIL'}")
if sys.argv[2].endswith("baked-doctor"):
    proof = r.get("import_proof") or {}
    print(f"  {sys.argv[2]}: baked doctor import proof: {proof.get('cache')}")
    if proof.get("cache") != "baked" and proof.get("file"):  # a miss: which part of the key differs from the bake's
        import glob, os
        mine = json.load(open(proof["file"]))["fingerprint"]
        for f in glob.glob(os.environ["BAKED_PROOFS"] + "/import-proofs/*.json"):
            theirs = json.load(open(f))["fingerprint"]
            diff = [f"{k}.{j}" for k in sorted({*mine, *theirs}) if mine.get(k) != theirs.get(k)
                    for j in (sorted({*mine.get(k, {}), *theirs.get(k, {})}) if isinstance(mine.get(k), dict) else [""])
                    if not isinstance(mine.get(k), dict) or mine[k].get(j) != (theirs.get(k) or {}).get(j)]
            print(f"  key parts that differ from {os.path.basename(f)}: {', '.join(diff)[:600]}")
PY
}

live() {  # live FILE: a verify JSON's cache line, timing and the proof's findings
  python3 - "$1" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no JSON:", e); sys.exit()
live = r.get("live") or {}
print(f"  verdict {r.get('verdict')} exit {r.get('exit_code')}; triton_cache {live.get('triton_cache')}")
print(f"  timing {live.get('timing')}")
for f in r.get("findings", []):
    if f["id"].startswith(("jit-cache", "jit-probe", "jit-run")):
        print(f"  {f['id']}: {f['message'][:400]}")
PY
}

gate() {
  rm -rf "$WORK/gate" "$WORK/baked-gate"
  run gate-cold 300 "$(fresh_env gate)" python3 -m kernelcheck verify --model "$MODEL" --mode train --json
  live "$OUT/gate-cold.json"
  run gate-warm 200 "$(fresh_env gate)" python3 -m kernelcheck verify --model "$MODEL" --mode train --json
  live "$OUT/gate-warm.json"
  run gate-bake 400 "$(bake_env)" python3 -m kernelcheck warm --model "$MODEL" --mode train \
    --cache-dir "$WORK/baked-gate" --json
  python3 -m kernelcheck warm --cache-dir "$WORK/baked-gate" --print-env | tee "$OUT/gate-env.txt"
  python3 -c "import json; m = json.load(open('$WORK/baked-gate/kernelcheck-cache.json')); print(json.dumps({k: m[k] for k in ('compiled', 'recheck', 'timing', 'keys')}, indent=1))" > "$OUT/gate-manifest.json"
  ls "$WORK/baked-gate/kernelcheck"/* 2>&1 | head -12 > "$OUT/gate-proofs.txt"  # the proofs warm baked
  run gate-baked 200 "$(baked_env "$WORK/baked-gate")" python3 -m kernelcheck verify \
    --model "$MODEL" --mode train --cache-dir "$WORK/baked-gate" --json
  live "$OUT/gate-baked.json"
  proofs gate-baked
  run gate-baked-plain 200 "$(baked_env "$WORK/baked-gate")" python3 -m kernelcheck verify \
    --model "$MODEL" --mode train --json
  proofs gate-baked-plain
  run gate-baked-doctor 200 "$(baked_env "$WORK/baked-gate")" python3 -m kernelcheck doctor \
    --model "$MODEL" --mode train --jit-probe --json
  BAKED_PROOFS="$WORK/baked-gate/kernelcheck" proofs gate-baked-doctor
  for k in cold warm; do proofs "gate-$k"; done
  ratios gate
  python3 - "$OUT/times.tsv" <<'PY' | tee -a "$OUT/summary.txt"
import sys
rows = {l.split("\t")[0]: float(l.split("\t")[1]) for l in open(sys.argv[1]) if l.strip()}
plain, cold = rows.get("gate-baked-plain"), rows.get("gate-cold")
if plain and cold:
    print(f"gate (no --cache-dir): baked {plain} s <= 30 s: {'PASS' if plain <= 30 else 'FAIL'}; "
          f"cold/baked {cold / plain:.1f}x >= 5: {'PASS' if cold / plain >= 5 else 'FAIL'}")
PY
  homes
}

proof() {
  local dir=$WORK/baked-gate man=$WORK/baked-gate/kernelcheck-cache.json
  [ -f "$man" ] || { say "proof: no baked folder, run gate first"; return; }
  cp "$man" "$WORK/manifest.orig"
  local vars
  vars=$(baked_env "$dir")
  d() {  # d LABEL [VAR=...]: doctor --cache-dir with the job's variables
    local label=$1; shift
    run "proof-$label" 200 "$vars $*" python3 -m kernelcheck doctor --model "$MODEL" --mode train --cache-dir "$dir" --json
    live "$OUT/proof-$label.json"
  }
  d hit
  python3 - "$man" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["keys"]["node"]["driver"] = "575.57.08"; json.dump(m, open(sys.argv[1], "w"))
PY
  d driver-edited
  cp "$WORK/manifest.orig" "$man"
  python3 - "$man" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["keys"]["triton"]["ptxas"] = "12.4.131"; json.dump(m, open(sys.argv[1], "w"))
PY
  d ptxas-edited
  cp "$WORK/manifest.orig" "$man"
  d fp-fusion-var TRITON_DEFAULT_FP_FUSION=0
  # measured, both ways: the baked folder as it is (a hit: nothing compiles) and with the variable (a miss), each in
  # a fresh process on a copy of the folder (the miss must not add to the baked folder itself)
  rm -rf "$WORK/baked-copy"; cp -r "$dir" "$WORK/baked-copy"
  run proof-measured-hit 200 "$(baked_env "$WORK/baked-copy")" python3 -m kernelcheck verify \
    --model "$MODEL" --mode train --cache-dir "$WORK/baked-copy" --json
  live "$OUT/proof-measured-hit.json"
  run proof-measured-miss 300 "$(baked_env "$WORK/baked-copy") TRITON_DEFAULT_FP_FUSION=0" \
    python3 -m kernelcheck verify --model "$MODEL" --mode train --cache-dir "$WORK/baked-copy" --json
  live "$OUT/proof-measured-miss.json"
}

packing() {
  rm -rf "$WORK/pack" "$WORK/baked-pack"
  run packing-cold 300 "$(fresh_env pack)" python3 -m kernelcheck verify --model "$MODEL" --packing --json
  run packing-warm 200 "$(fresh_env pack)" python3 -m kernelcheck verify --model "$MODEL" --packing --json
  run packing-bake 400 "$(bake_env)" python3 -m kernelcheck warm --model "$MODEL" --mode train \
    --packing --cache-dir "$WORK/baked-pack" --json
  run packing-baked 200 "$(baked_env "$WORK/baked-pack")" python3 -m kernelcheck verify \
    --model "$MODEL" --packing --json
  ratios packing
}

step() {
  rm -rf "$WORK/step" "$WORK/baked-step"
  local s=(python3 benchmarks/warm_first_step.py --model "$MODEL" --shape full --tokens 8192)
  run step-cold 300 "$(fresh_env step)" "${s[@]}"
  run step-warm 200 "$(fresh_env step)" "${s[@]}"
  run step-bake 400 "$(bake_env)" python3 -m kernelcheck warm --model "$MODEL" --mode train \
    --shape full --tokens 8192 --cache-dir "$WORK/baked-step" --json
  run step-baked 200 "$(baked_env "$WORK/baked-step")" "${s[@]}"
  for k in cold warm baked; do say "  step-$k: $(tail -1 "$OUT/step-$k.json")"; done
  ratios step
}

versions
for part in ${*:-gate proof}; do
  case $part in
    install|gate|proof|packing|step) "$part" ;;
    *) echo "unknown part $part (install, gate, proof, packing, step)"; exit 2 ;;
  esac
done
