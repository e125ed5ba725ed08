#!/usr/bin/env bash
# `kernelcheck hub --bundle` / `--verify-bundle` on the GPU machine (torch 2.11.0+cu130, Python 3.12, no network),
# with the real kernels 0.19.1: a bundle built against a local stand-in Hub (tests/fake_hub.py; the real Hub cannot be
# reached there), for this machine's own torch/CUDA as kernels' resolver sees it on a CUDA torch build, verified
# offline, then loaded offline from the unpacked bundle with the real `kernels.get_kernel`. The builds are STAND-INS
# (tests/kernel_repos.py: pure Python in kernels' layout, three variants: cu130, cpu and an older cu126 one); what a
# real Hub kernel does on the GPU is not measured, only which build kernels chooses and loads from the bundle and
# whether --verify-bundle agrees.
#
# Needs the part4 wheelhouse (kernels 0.19.1, huggingface_hub, tomlkit, httpx2 ...) at $WH (default /tmp/kcwh),
# prepared here with: bash benchmarks/gpu/prepare_differential.sh (it fills .carry/wh/part4)
#   run(carry=[".carry/wh/part4"], command="mkdir -p /tmp/kcwh && cp -r .carry/wh/part4 /tmp/kcwh/ && \
#       bash benchmarks/gpu/gpu_hub_bundle.sh")                                               # ~1-2 min
# Expect (files under $OUT): build.json exit 0, entries[0].variant torch211-cxx11-cu130-x86_64-linux, digest ok;
# verify.json exit 0, checks[0].resolved_variant the same, digest ok; load.txt the loaded module's path under
# <DIR>/cache/.../build/torch211-cxx11-cu130-x86_64-linux/ (kernels chose the same build, offline); latest.json exit 0
# with finding hub-bundle-all-latest (warning); tampered.json exit 4 with hub-bundle-digest (broken) and
# load-tampered.txt "FAILED RuntimeError ... digest" (kernels raises too). exits.txt lists every exit code.
# Without sigstore on the machine, the signature check is hub-bundle-not-checked (info): kernels skips it too.
# Smoke-tested on the CPU machine: EXTRA_VARIANTS=torch213-cxx11-cpu-x86_64-linux S=<a kernels 0.19.1 site>.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kc-out}
WH=${WH:-/tmp/kcwh}
PY=${PYTHON:-python3}
S=${S:-/tmp/s-bundle}
W=$(mktemp -d)
mkdir -p "$OUT" "$S"
files=()
for g in kernels-0.19.1-*.whl huggingface_hub-*.whl tomlkit-*.whl hf_xet-*.whl httpx2-*.whl httpcore2-*.whl \
         truststore-*.whl idna-*.whl anyio-*.whl h11-*.whl click-*.whl; do files+=( $WH/part4/$g ); done
[ -d "$S/kernels" ] || $PY -m pip install -q --no-index --no-deps --no-compile --target "$S" "${files[@]}" \
  > /tmp/kc-bundle-site.log 2>&1 || tail -3 /tmp/kc-bundle-site.log
export PYTHONPATH="$S:$PWD" PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  $PY -c "import torch, kernels; print(torch.__version__, torch.version.cuda, 'kernels', kernels.__version__)"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

$PY - "$W" "$OUT" <<'PYEOF'
import base64, hashlib, json, os, subprocess, sys, tarfile
from pathlib import Path
from tests.fake_hub import FakeHub, organization, publish
w, out = Path(sys.argv[1]), Path(sys.argv[2])
repo, variants = "kernels-community/activation", ["torch211-cxx11-cu130-x86_64-linux",
                                                  "torch211-cxx11-cpu-x86_64-linux", "torch29-cxx11-cu126-x86_64-linux"]
variants += [v for v in os.environ.get("EXTRA_VARIANTS", "").split(",") if v]  # a CPU smoke run: this torch's
commit = publish(w / "srv", repo, variants, versions=(1,))
organization(w / "srv", "kernels-community", trusted=True)
for v in variants:  # a digest in kernels' format, so kernels' digest check runs
    d = w / "srv" / "kernels-community" / "activation" / commit / "build" / v
    files = {f.name: base64.b64encode(hashlib.sha256(f.read_bytes()).digest()).decode()
             for f in sorted(d.iterdir()) if f.is_file() and f.name != "metadata.json"}
    meta = json.loads((d / "metadata.json").read_text())
    (d / "metadata.json").write_text(json.dumps({**meta, "digest": {"algorithm": "sha256", "files": files}}))
exits = {}
def kc(name, args, env):
    e = dict(os.environ, **env)
    r = subprocess.run([sys.executable, "-m", "kernelcheck", "hub", *args, "--json"], capture_output=True, text=True,
                       env=e, timeout=300)
    (out / f"{name}.json").write_text(r.stdout or r.stderr[-3000:])
    exits[name] = r.returncode
offline = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(w / "node-cache"), "HF_ENDPOINT": "http://127.0.0.1:9"}
with FakeHub(w / "srv") as hub:
    kc("build", ["--repo", f"{repo}@v1", "--arch", "9.0", "--bundle", str(w / "b.tar.gz")],
       {"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(w / "build-cache")})
kc("verify", ["--verify-bundle", str(w / "b.tar.gz")], offline)
kc("latest", ["--verify-bundle", str(w / "b.tar.gz")], {**offline, "UNSTABLE_KERNELS_ALL_LATEST": "1"})
def load(name, bundle):
    node = w / name
    node.mkdir()
    with tarfile.open(bundle) as t:
        t.extractall(node, filter="data")
    e = dict(os.environ, **offline, KERNELS_CACHE=str(node / "cache"))
    r = subprocess.run([sys.executable, "tests/programs/hub_get_kernel.py", repo, "1"], capture_output=True,
                       text=True, env=e, timeout=300)
    (out / f"{name}.txt").write_text(r.stdout + r.stderr[-2000:])
load("load", w / "b.tar.gz")
# tampered: one file of the bundled build changed after the build (kernels' digest check must raise)
with tarfile.open(w / "b.tar.gz") as src, tarfile.open(w / "t.tar.gz", "w:gz") as dst:
    for m in src.getmembers():
        data = src.extractfile(m).read() if m.isfile() else None
        if data is not None and b"class TinyRMSNormGated" in data:  # layers.py (a blob: the cache links to it)
            data += b"\n# changed\n"
            m.size = len(data)
        import io
        dst.addfile(m, io.BytesIO(data) if data is not None else None)
kc("tampered", ["--verify-bundle", str(w / "t.tar.gz")], offline)
load("load-tampered", w / "t.tar.gz")
(out / "exits.txt").write_text(json.dumps(exits) + "\n")
print(json.dumps(exits))
PYEOF
ls -l "$OUT"
