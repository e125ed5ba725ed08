"""Arch-targeted vs upstream default build cost, and wheel reuse, measured on this machine.

Where a full causal-conv1d build does not fit (it takes ~400 s for sm_90 alone on 16 cores), this
measures what the choice changes: nvcc time for one real kernel file of the causal-conv1d sdist,
compiled exactly as its setup.py compiles it (same flags, torch's include dirs), for the one target
arch (sm_90) and for the upstream default list (nine arches with nvcc 13). Then it times a second
`kernelcheck install` that finds the built wheel in the wheelhouse (no compile at all).

Usage (a CUDA build of torch is needed for the headers; the test venv has one):
  python benchmarks/build_time.py --python ~/.cache/kernelcheck-tests/venv-torch-2.14.1-cp311/bin/python \\
      --sdist .carry/causal_conv1d-1.7.0.tar.gz [--file causal_conv1d_update.cu] [--out out/build_time.json]
Prints a side-by-side table and writes JSON. On the H200 (about 1-2 minutes):
  python3 benchmarks/build_time.py --python python3 --sdist .carry/causal_conv1d-1.7.0.tar.gz --skip-reuse \
      --out $OUT/build_time_h200.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernelcheck.install import wheels  # noqa: E402

# upstream causal-conv1d 1.7.0 setup.py with nvcc >= 13.0 (docs/facts.md section 3)
UPSTREAM = (75, 80, 87, 90, 100, 120, 103, 110, 121)
FLAGS = ["-O3", "-std=c++17", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
         "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
         "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__", "--expt-relaxed-constexpr",
         "--expt-extended-lambda", "--use_fast_math", "-lineinfo", "--threads", "4", "-Xcompiler", "-fPIC",
         "-DTORCH_EXTENSION_NAME=causal_conv1d_cuda", "-DTORCH_API_INCLUDE_EXTENSION_H"]


def torch_includes(python: str) -> list[str]:
    code = ("from torch.utils.cpp_extension import include_paths; import sysconfig;"
            "print('\\n'.join(include_paths() + [sysconfig.get_paths()['include']]))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    return [f"-I{p}" for p in out.split()]


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def compile_once(src: Path, arches: tuple[int, ...], incs: list[str],
                 out: Path) -> tuple[float, float, tuple[str, ...]]:
    """(wall s, CPU s of nvcc and its children, arches in the object)."""
    gen = [x for a in arches for x in ("-gencode", f"arch=compute_{a},code=sm_{a}")]
    cmd = ["nvcc", "-c", str(src), "-o", str(out), *FLAGS, *gen, *incs, f"-I{src.parent}"]
    t0, c0 = time.monotonic(), _child_cpu()
    res = subprocess.run(cmd, capture_output=True, text=True)
    dt, cpu = time.monotonic() - t0, _child_cpu() - c0
    if res.returncode != 0:
        raise SystemExit(f"nvcc failed:\n{res.stderr[-2000:]}")
    return dt, cpu, wheels.so_arches(out.read_bytes())


def reuse_timing(python: str, tmp: Path) -> dict:
    """kernelcheck install twice (tiny causal-conv1d-shaped sdist, --arch 9.0): build, then wheel reuse."""
    from tests.kcfixtures import scratch_venv, tiny_sdist  # test helpers make the real artifacts

    venv = Path(python).parent.parent
    sd = tiny_sdist(tmp / "src")
    wh = tmp / "wh"
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    out = {}
    for label, extra in (("first (build)", ["--source", "build", "--sdist", str(sd)]), ("second (reuse)", [])):
        scratch = scratch_venv(venv, tmp / label.split()[0])
        t0 = time.monotonic()
        res = subprocess.run([str(scratch / "bin" / "python"), "-m", "kernelcheck", "install", "--model",
                              "qwen3.8-27b", "--package", "causal-conv1d", "--arch", "9.0", "--offline",
                              "--wheelhouse", str(wh), *extra], capture_output=True, text=True, env=env)
        dt = time.monotonic() - t0
        compiled = sum(1 for ln in res.stdout.splitlines() if ln.strip().startswith("[") and "/" in ln[:10])
        out[label] = {"seconds": round(dt, 1), "exit": res.returncode, "compile_steps": compiled,
                      "reused": "reused: no rebuild" in res.stdout}
        print(f"install {label:<15}: {dt:6.1f} s  exit {res.returncode}  compile steps {compiled}"
              f"{'  (wheel reused)' if out[label]['reused'] else ''}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="python of an env with a CUDA build of torch")
    ap.add_argument("--sdist", default=str(REPO / ".carry" / "causal_conv1d-1.7.0.tar.gz"))
    ap.add_argument("--file", default="causal_conv1d_update.cu", help="kernel file of the sdist to compile")
    ap.add_argument("--upstream", default=",".join(map(str, UPSTREAM)))
    ap.add_argument("--out", default=str(REPO / "out" / "build_time.json"))
    ap.add_argument("--skip-nvcc", action="store_true", help="only the install/reuse timing")
    ap.add_argument("--skip-reuse", action="store_true", help="only the nvcc per-arch timing (e.g. on the GPU machine)")
    args = ap.parse_args()
    upstream = tuple(int(a) for a in args.upstream.split(","))
    incs = torch_includes(args.python)
    results: dict = {"file": args.file, "nproc": os.cpu_count(), "nvcc_threads": 4,
                     "loadavg_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_nvcc:
            with tarfile.open(args.sdist) as tf:
                tf.extractall(tmp, filter="data")
            src = next(Path(tmp).glob(f"*/csrc/{args.file}"))
            one, one_cpu, one_arches = compile_once(src, (90,), incs, Path(tmp) / "one.o")
            print(f"sm_90 only          : {one:7.1f} s wall {one_cpu:7.1f} s CPU  object carries "
                  f"{', '.join(one_arches)}", flush=True)
            nine, nine_cpu, nine_arches = compile_once(src, upstream, incs, Path(tmp) / "nine.o")
            print(f"upstream {len(upstream)} arches : {nine:7.1f} s wall {nine_cpu:7.1f} s CPU  object carries "
                  f"{', '.join(nine_arches)}", flush=True)
            results.update({"sm90_seconds": round(one, 1), "upstream_seconds": round(nine, 1),
                            "sm90_cpu_seconds": round(one_cpu, 1), "upstream_cpu_seconds": round(nine_cpu, 1),
                            "upstream_arches": [f"sm_{a}" for a in upstream], "ratio_wall": round(nine / one, 2),
                            "ratio_cpu": round(nine_cpu / one_cpu, 2),
                            "sm90_object_arches": list(one_arches), "upstream_object_arches": list(nine_arches)})
            print(f"\n{'build of ' + args.file:<36}{'wall s':>9}{'CPU s':>9}{'x wall':>8}{'x CPU':>8}")
            print(f"{'sm_90 only (kernelcheck)':<36}{one:>9.1f}{one_cpu:>9.1f}{1.0:>8.2f}{1.0:>8.2f}")
            print(f"{'upstream default (9 arches)':<36}{nine:>9.1f}{nine_cpu:>9.1f}{nine / one:>8.2f}"
                  f"{nine_cpu / one_cpu:>8.2f}\n")
        if not args.skip_reuse:
            results["reuse"] = reuse_timing(args.python, Path(tmp))
        shutil.rmtree(Path(tmp) / "wh", ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
