"""Build Dockerfile.build's two stages outside docker, for real, on a base that is a CUDA torch venv.

Where no Docker engine runs, this is the image build that needs no GPU: the RUN lines are read out of
Dockerfile.build (tests/dockerfile.py) and run with the Dockerfile's own shell, `/opt/kernels`, `/wheelhouse` and
`/src/kernelcheck` mapped into WORK, and BASE_PYTHON's venv as the base image (its torch, triton, transformers and
pip; nvcc and g++ from this machine's PATH, as in a -devel image). Unlike the integration test's stand-in (a CPU
torch, `install --dry-run`), the build stage's `kernelcheck install` runs as written: it fetches the kernels and
compiles the ones without a wheel for the base's torch (causal-conv1d for ARCH) here. The final stage removes what
the build stage left outside /opt/kernels (the sources, the wheelhouse cache mount) and runs the gate as written,
plus --json. Prints one line per step and writes WORK/summary.json.

    python scripts/image_stages.py --base-python ~/.cache/kernelcheck-tests/venv-torch-2.14.1-cp311/bin/python \
        --work /tmp/image-cuda [--build-arg MODEL=qwen3.8-27b --build-arg ARCH=9.0 --build-arg MODE=train]

Exit code: the gate's (0 ready, 3 fallback, 4 broken), or the failing build step's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import dockerfile


def _versions(python: Path) -> dict[str, str]:
    code = ("import json, importlib.metadata as md\n"
            "out = {}\n"
            "for n in ('torch', 'triton', 'transformers', 'kernels', 'huggingface_hub', 'kernelcheck-transformers',"
            " 'fla-core', 'causal-conv1d', 'tilelang'):\n"
            "    try: out[n] = md.version(n)\n"
            "    except md.PackageNotFoundError: pass\n"
            "print(json.dumps(out))")
    res = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return json.loads(res.stdout) if res.returncode == 0 else {"error": res.stderr[-500:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-python", type=Path, required=True, help="the base image's python (a venv's bin/python)")
    ap.add_argument("--work", type=Path, required=True, help="an empty folder for the mapped image paths")
    ap.add_argument("--build-arg", action="append", default=[], metavar="K=V")
    ap.add_argument("--step-timeout", type=float, default=5400, help="seconds one RUN step may take")
    a = ap.parse_args(argv)
    args = dict(kv.split("=", 1) for kv in a.build_arg)
    a.work.mkdir(parents=True, exist_ok=True)
    em = dockerfile.Emulated(a.work, build_args=args, base_python=a.base_python, timeout=a.step_timeout)
    steps: list[dict[str, object]] = []
    summary: dict[str, object] = {"base": _versions(a.base_python), "build_args": args, "steps": steps}

    def record(stage: str, ins: dockerfile.Instruction, res: subprocess.CompletedProcess[str], secs: float,
               name: str) -> None:
        (a.work / f"{name}.out").write_text(res.stdout)
        (a.work / f"{name}.err").write_text(res.stderr)
        steps.append({"stage": stage, "line": ins.line, "command": ins.args[:200], "exit": res.returncode,
                      "seconds": round(secs, 1)})
        print(f"{stage} line {ins.line}: exit {res.returncode} in {secs:.0f} s ({name}.out/.err)", flush=True)

    def finish(code: int) -> int:
        (a.work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        return code

    for n, (ins, env, cwd) in enumerate(em.steps("build")):
        if ins.keyword == "COPY":
            em.copy_context(ins, cwd)
        elif ins.keyword == "RUN":
            t0 = time.monotonic()
            res = em.run("build", ins, env, cwd)
            record("build", ins, res, time.monotonic() - t0, f"build-{n}")
            if res.returncode != 0:
                return finish(res.returncode)
    # The final stage starts from the base again: only /opt/kernels crosses (COPY --from=build, same path).
    for gone in ("/src/kernelcheck", "/wheelhouse"):
        shutil.rmtree(em.path(gone), ignore_errors=True)
    venv_python = Path(em.path("/opt/kernels")) / "bin" / "python"
    summary["kernels_venv"] = _versions(venv_python)
    ((gate, env, cwd),) = [(i, e, c) for i, e, c in em.steps("final") if i.keyword == "RUN"]
    t0 = time.monotonic()
    res = em.run("final", gate, env, cwd, extra=["--json"])
    record("final", gate, res, time.monotonic() - t0, "final-gate")
    try:
        report = json.loads(res.stdout)
        summary["gate"] = {"verdict": report["verdict"], "exit_code": report["exit_code"],
                           "functions": {f["name"]: f["status"] for f in report["functions"] if f.get("used", True)},
                           "findings": sorted({f["id"] for f in report["findings"]})}
    except (ValueError, KeyError) as e:
        summary["gate"] = {"unreadable": str(e)}
    junit = Path(em.path("/opt/kernels/share/kernelcheck/doctor-build.xml"))
    summary["junit"] = junit.is_file()
    print(json.dumps(summary.get("gate")), flush=True)
    return finish(res.returncode)


if __name__ == "__main__":
    raise SystemExit(main())
