"""`kernelcheck install` end to end: real pip, real wheels and sdists made here, real nvcc, offline.

Installs go into scratch venvs that see a cached CUDA-torch venv (torch 2.14.1, CUDA 13) through a
.pth file, so neither that venv nor the test venv changes. No GPU here: `--arch 9.0` stands in, as in
a docker build stage (the only stand-in these tests use).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelcheck.install import apply as installer
from kernelcheck.install import wheels
from tests.kcfixtures import (
    causal_conv1d_wheel,
    cuda_torch_venv,
    extension_so,
    have_nvcc,
    kc,
    make_wheel,
    scratch_venv,
    site_packages,
    tiny_sdist,
)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH")]
MODEL = "qwen3.8-27b"


@pytest.fixture(scope="module")
def cuda_venv() -> Path:
    return cuda_torch_venv()


def _py(v: Path) -> Path:
    return v / "bin" / "python"


def _pip_show(py: Path, dist: str) -> dict[str, str]:
    out = subprocess.run([str(py), "-m", "pip", "show", dist], capture_output=True, text=True).stdout
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def _severities(report: dict) -> dict[str, str]:
    """Finding id -> severity."""
    return {f["id"]: f["severity"] for f in report["findings"]}


def _json(res: subprocess.CompletedProcess) -> dict:
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"exit {res.returncode}\nstdout={res.stdout[-3000:]}\nstderr={res.stderr[-3000:]}")


def _fla_wheels(wh: Path) -> None:
    make_wheel(wh, "fla-core", "0.6.0", py="py3", plat="any", abi="none",
               # the package as doctor probes it (fla.ops.gated_delta_rule imports), without the kernels
               files={"fla/__init__.py": b"__version__ = '0.6.0'\n", "fla/ops/__init__.py": b"",
                      "fla/ops/gated_delta_rule/__init__.py": b""},
               requires=("einops", 'torch>=2.7.0; extra == "cuda"', 'triton>=3.3; extra == "cuda"'))
    make_wheel(wh, "einops", "0.8.2", py="py3", plat="any", abi="none", files={"einops/__init__.py": b""})


def test_cpu_torch_is_refused_with_a_reason():
    res = kc(Path(sys.executable), ["install", "--model", MODEL, "--dry-run", "--offline", "--json"])
    data = _json(res)
    assert res.returncode == 3 and data["exit_code"] == 3 and data["command"] == "install"
    steps = {s["package"]: s for s in data["plan"]}
    assert (steps["causal-conv1d"]["action"], steps["causal-conv1d"]["kind"]) == ("refuse", "cpu-torch")
    assert (steps["fla-core"]["action"], steps["fla-core"]["kind"]) == ("refuse", "cpu-torch")
    text = kc(Path(sys.executable), ["install", "--model", MODEL, "--dry-run", "--offline"])
    lines = [ln.strip() for ln in text.stdout.splitlines()]
    # the text says each step's reason (the words are tested once, in tests/unit/test_plan_wording.py) and the
    # verdict line carries the exit code
    assert [ln.removeprefix("why: ") for ln in lines if ln.startswith("why: ")] == [s["reason"] for s in data["plan"]]
    assert text.returncode == 3 and lines[-1].split("(exit ")[1].startswith("3)")


@pytest.mark.parametrize("args, words", [
    (["--arch", "banana"], "--arch: 'banana' is not a CUDA compute capability"),
    (["--sdist", "/nonexistent/causal_conv1d-1.7.0.tar.gz"], "does not exist"),
    (["--package", "numpy"], "unknown kernel package"),
])
def test_bad_flags_exit_2(args, words):
    res = kc(Path(sys.executable), ["install", "--model", MODEL, "--dry-run", "--offline", *args])
    assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr


def test_wheelhouse_install_offline_picks_the_matching_wheel(cuda_venv: Path, tmp_path: Path):
    wh = tmp_path / "wh"
    good = causal_conv1d_wheel(wh)
    causal_conv1d_wheel(wh, version="1.6.9", local="cu13torch2.13cxx11abiTRUE")
    causal_conv1d_wheel(wh, version="1.6.8", local="cu13torch2.14cxx11abiFALSE")
    causal_conv1d_wheel(wh, version="1.6.7", arches=(80,))
    causal_conv1d_wheel(wh, version="1.6.6", py="cp312" if "cp311" in good.name else "cp311")
    corrupt = causal_conv1d_wheel(tmp_path / "c", version="1.6.5")
    (wh / corrupt.name).write_bytes(corrupt.read_bytes()[:4000])
    _fla_wheels(wh)
    scratch = scratch_venv(cuda_venv, tmp_path / "scratch")
    res = kc(_py(scratch), ["install", "--model", MODEL, "--wheelhouse", str(wh), "--arch", "9.0", "--offline",
                            "--json"])
    data = _json(res)
    # the exit code is the worst verdict printed: the doctor block after install (here FALLBACK: this
    # machine's stand-in CUDA torch cannot run the kernels) decides, and the JSON carries its functions
    after = data["doctor_after"]
    assert res.returncode == after["exit_code"] and data["verdict"] == after["verdict"], res.stderr[-3000:]
    assert data["functions"] == after["functions"] and data["functions"]
    steps = {s["package"]: s for s in data["plan"]}
    cc = steps["causal-conv1d"]
    assert cc["action"] == "install" and cc["source"] == "wheelhouse"
    assert cc["spec"] == "causal-conv1d==1.7.0+cu13torch2.14cxx11abiTRUE" and cc["arches"] == ["sm_90"]
    assert cc["kind"] == "wheelhouse-wheel"
    kind = {r["candidate"].split(" ")[0]: r["kind"] for r in cc["rejected"]}
    assert kind[[k for k in kind if "1.6.9" in k][0]] == "torch-minor"
    assert kind[[k for k in kind if "1.6.8" in k][0]] == "cxx11abi"
    assert kind[[k for k in kind if "1.6.7" in k][0]] == "gpu-arch"
    assert kind[[k for k in kind if "1.6.6" in k][0]] == "wheel-tags"
    assert kind[[k for k in kind if "1.6.5" in k][0]] == "wheel-file"
    assert steps["fla-core"]["action"] == "install" and steps["einops"]["action"] == "install"
    # installed into the scratch venv, recorded, torch untouched
    assert {e["distribution"] for e in data["installed"]} == {"causal-conv1d", "fla-core", "einops"}
    man = json.loads(Path(data["manifest"]).read_text())
    entry = man["packages"]["causal_conv1d"]
    assert entry["so_arches"] == ["sm_90"] and entry["sha256"] == wheels.sha256_file(good)
    assert entry["source"] == "wheelhouse" and entry["torch"].startswith("2.14.1")
    torch_show = _pip_show(_py(scratch), "torch")
    assert torch_show["Version"] == "2.14.1" and str(site_packages(cuda_venv)) in torch_show["Location"]
    assert (site_packages(scratch) / "causal_conv1d").is_dir()
    assert not (site_packages(cuda_venv) / "causal_conv1d").exists()
    assert data["doctor_after"]["command"] == "doctor"
    # a second run keeps what is there
    again = _json(kc(_py(scratch), ["install", "--model", MODEL, "--wheelhouse", str(wh), "--arch", "9.0",
                                     "--offline", "--json", "--dry-run"]))
    assert {s["package"]: s["action"] for s in again["plan"]}["causal-conv1d"] == "keep"
    # and for real: nothing to change, said once (not the doctor block and then the report again)
    same = kc(_py(scratch), ["install", "--model", MODEL, "--wheelhouse", str(wh), "--arch", "9.0", "--offline"])
    lines = same.stdout.splitlines()
    assert lines[-1].startswith("verdict (nothing to change)"), same.stdout[-3000:]
    assert sum(ln.startswith("verdict") for ln in lines) == 1  # its words: tests/unit/test_output_words.py
    # doctor explains a manifest that no longer fits (built for another torch minor)
    entry["torch_mm"] = "2.11"
    Path(data["manifest"]).write_text(json.dumps(man))
    doc = _json(kc(_py(scratch), ["doctor", "--model", MODEL, "--json"]))
    assert [f["severity"] for f in doc["findings"] if f["id"] == "manifest-torch-changed"] == ["warning"]


def test_build_for_one_arch_then_reuse_without_rebuild(cuda_venv: Path, tmp_path: Path):
    wh = tmp_path / "wh"
    wh.mkdir()
    sd = tiny_sdist(tmp_path / "src")
    scratch = scratch_venv(cuda_venv, tmp_path / "s1")
    args = ["install", "--model", MODEL, "--package", "causal-conv1d", "--arch", "9.0", "--offline",
            "--wheelhouse", str(wh)]
    res = kc(_py(scratch), [*args, "--source", "build", "--sdist", str(sd)])
    assert res.returncode == 3, res.stdout[-3000:] + res.stderr[-3000:]  # post-install doctor: FALLBACK (no GPU here)
    assert "dropped upstream sm_75, sm_80" in res.stdout \
        and "[2/2]" in res.stdout  # wording: renderer test; visible progress
    built = [p for p in wh.glob("causal_conv1d-*.whl")]
    assert len(built) == 1
    info = wheels.inspect_wheel(built[0])
    (arches,) = info.so_arches.values()
    assert arches == ("sm_90",)  # only the requested arch: no sm_75 / sm_80 SASS
    assert (wh / (built[0].name + ".kernelcheck.json")).exists()
    # a second install elsewhere reuses the wheel: no compile
    scratch2 = scratch_venv(cuda_venv, tmp_path / "s2")
    res2 = kc(_py(scratch2), [*args, "--json"])
    assert res2.returncode == 3, res2.stdout[-3000:]
    (step,) = _json(res2)["plan"]  # the wheel built above, from the wheelhouse: no compile
    assert (step["kind"], step["action"], step["artifact"]) == ("wheelhouse-wheel", "install", str(built[0]))
    assert [e["source"] for e in _json(res2)["installed"]] == ["wheelhouse"]
    assert _pip_show(_py(scratch2), "torch")["Version"] == "2.14.1"


def test_failed_build_or_bad_wheel_leaves_the_environment_as_it_was(cuda_venv: Path, tmp_path: Path):
    scratch = scratch_venv(cuda_venv, tmp_path / "s")
    wh = tmp_path / "wh"
    causal_conv1d_wheel(wh, version="1.7.0")
    ok = kc(_py(scratch), ["install", "--model", MODEL, "--package", "causal-conv1d", "--arch", "9.0", "--offline",
                           "--wheelhouse", str(wh)])
    assert ok.returncode == 3, ok.stdout[-2000:]
    # a broken sdist: the build fails, nothing changes
    bad = tiny_sdist(tmp_path / "bad", version="1.8.0", broken=True)
    (tmp_path / "wh2").mkdir()
    res = kc(_py(scratch), ["install", "--model", MODEL, "--package", "causal-conv1d", "--arch", "9.0", "--offline",
                            "--source", "build", "--sdist", str(bad), "--wheelhouse", str(tmp_path / "wh2"), "--json"])
    assert res.returncode == 4 and _severities(_json(res))["install-failed"] == "broken"  # the build failed
    assert _pip_show(_py(scratch), "causal-conv1d")["Version"].lower() == "1.7.0+cu13torch2.14cxx11abitrue"
    # a newer wheel whose extension does not import: installed, checked, rolled back to 1.7.0
    wh3 = tmp_path / "wh3"
    so = extension_so((90,), name="not_the_right_module")
    make_wheel(wh3, "causal-conv1d", "1.9.0+cu13torch2.14cxx11abiTRUE",
               files={"causal_conv1d/__init__.py": b"", "causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so": so})
    res = kc(_py(scratch), ["install", "--model", MODEL, "--package", "causal-conv1d", "--arch", "9.0", "--offline",
                            "--source", "wheelhouse", "--wheelhouse", str(wh3), "--json"])
    assert res.returncode == 4 and _severities(_json(res))["install-failed"] == "broken", res.stdout[-2000:]
    assert _pip_show(_py(scratch), "causal-conv1d")["Version"].lower() == "1.7.0+cu13torch2.14cxx11abitrue"
    probe = subprocess.run([str(_py(scratch)), "-c", "import causal_conv1d_cuda"], capture_output=True, text=True,
                           cwd=str(tmp_path))
    assert probe.returncode == 0, probe.stderr


def test_two_installs_at_once_wait_for_the_lock(cuda_venv: Path, tmp_path: Path):
    import os

    from tests.envs import REPO

    scratch = scratch_venv(cuda_venv, tmp_path / "s")
    wh = tmp_path / "wh"
    causal_conv1d_wheel(wh)
    lock_paths = [wh / ".kernelcheck.lock", site_packages(scratch) / ".kernelcheck-install.lock"]
    log = tmp_path / "second.log"
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    with installer.locked(lock_paths, progress=lambda s: None):  # the "first" install holds the locks
        with open(log, "w") as fh:
            proc = subprocess.Popen([str(_py(scratch)), "-m", "kernelcheck", "install", "--model", MODEL,
                                     "--package", "causal-conv1d", "--arch", "9.0", "--offline", "--wheelhouse",
                                     str(wh)], stdout=fh, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 300
        while "waiting for another kernelcheck install" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-2000:]
            time.sleep(1)
        assert "waiting for another kernelcheck install" in log.read_text()
        time.sleep(2)
        assert proc.poll() is None and not (site_packages(scratch) / "causal_conv1d").exists()
    assert proc.wait(300) == 3, log.read_text()[-3000:]  # installed; post-install doctor FALLBACK (no GPU)
    assert (site_packages(scratch) / "causal_conv1d").is_dir()


def test_target_dir_install(cuda_venv: Path, tmp_path: Path):
    wh = tmp_path / "wh"
    causal_conv1d_wheel(wh)
    target = tmp_path / "site"
    res = kc(_py(cuda_venv), ["install", "--model", MODEL, "--package", "causal-conv1d", "--arch", "9.0",
                              "--offline", "--wheelhouse", str(wh), "--target", str(target), "--json"])
    data = _json(res)
    # only causal-conv1d was installed: the doctor after install says FALLBACK for the fla functions, and the
    # command's verdict is the worst it printed (never READY under that block); its JSON carries the functions
    assert res.returncode == 3 and data["verdict"] == "fallback", res.stderr[-2000:]
    assert data["doctor_after"]["verdict"] == "fallback" and data["functions"] == data["doctor_after"]["functions"]
    assert {f["name"]: f["status"] for f in data["functions"]}["chunk_gated_delta_rule"] == "fallback"
    assert (target / "causal_conv1d").is_dir() and (target / ".kernelcheck-manifest.json").exists()
    assert not (site_packages(cuda_venv) / "causal_conv1d").exists()
    kinds = {p["distribution"]: p for p in data["doctor_after"]["environment"]["packages"].values() if p["installed"]}
    assert "causal-conv1d" in kinds


def test_hopper_with_triton_3_6_plan_says_fla_640_end_to_end(cuda_venv: Path, tmp_path: Path):
    """The real CLI with a real triton 3.6.0 first on the path (the H200's triton) and --arch 9.0."""
    from tests.envs import site

    tri = site("triton==3.6.0")
    wh = tmp_path / "wh"
    _fla_wheels(wh)
    scratch = scratch_venv(cuda_venv, tmp_path / "s")
    env = {"PYTHONPATH": f"{tri}:{Path(__file__).resolve().parents[2]}"}
    args = ["install", "--model", MODEL, "--package", "fla-core", "--arch", "9.0", "--offline", "--wheelhouse",
            str(wh), "--dry-run"]
    res = kc(_py(scratch), [*args, "--mode", "train"], env=env)
    assert res.returncode == 4, res.stdout[-3000:] + res.stderr[-2000:]
    # train mode installs the additive fix by default; with no tilelang in the wheelhouse that is a refusal
    data = _json(kc(_py(scratch), [*args, "--mode", "train", "--json"], env=env))
    steps = {s["package"]: s for s in data["plan"]}
    assert (steps["tilelang"]["action"], steps["tilelang"]["severity"]) == ("refuse", "broken")
    assert steps["fla-core"]["severity"] == "broken" and data["environment"]["triton"] == "3.6.0"
    assert steps["fla-core"]["rules"] == ["fla-640-refuses"]  # the breakage behind its severity
    assert steps["triton"]["action"] == "offer" and "--allow-change triton" in steps["triton"]["command"]
    assert data["predicted"] == "broken" and not data["executed"]  # a dry run changes nothing
    assert _severities(data) == {"install-predicts-broken": "broken", "install-refuse": "fallback",
                                 "install-leaves-package": "fallback"}
    data = _json(kc(_py(scratch), [*args, "--mode", "train", "--json", "--no-fixes"], env=env))
    offers = {s["package"]: s for s in data["plan"] if s["action"] == "offer"}
    assert offers["triton"]["spec"] == "triton>=3.7.1" and "tilelang" in offers
    infer = kc(_py(scratch), [*args, "--mode", "infer", "--json"], env=env)
    # fla-core is fine in infer mode, but --package fla-core leaves causal-conv1d absent: the doctor after the
    # real install says FALLBACK (exit 3), and so must the dry run (it once said READY, exit 0)
    ids = {f["id"]: f for f in _json(infer)["findings"]}
    assert infer.returncode == 3 and not any(i.startswith("fla-640") for i in ids)
    assert ids["install-leaves-package"]["severity"] == "fallback"
    assert {"causal_conv1d_fn"} <= set(ids["install-leaves-package"]["functions"])
    assert not (site_packages(scratch) / "fla").exists()  # dry run


def test_release_wheel_is_checked_before_download_and_verified(cuda_venv: Path, tmp_path: Path):
    """The upstream release URL, served from a loopback mirror (KERNELCHECK_RELEASE_MIRROR)."""
    import http.server
    import socketserver
    import threading

    root = tmp_path / "mirror"
    rel = root / "Dao-AILab" / "causal-conv1d" / "releases" / "download" / "v1.7.0"
    causal_conv1d_wheel(rel)  # causal_conv1d-1.7.0+cu13torch2.14cxx11abiTRUE-cp311-...whl, as upstream names it

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    with socketserver.TCPServer(("127.0.0.1", 0), Quiet) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        scratch = scratch_venv(cuda_venv, tmp_path / "s")
        (tmp_path / "wh").mkdir(exist_ok=True)
        args = ["install", "--model", MODEL, "--package", "causal-conv1d==1.7.0", "--arch", "9.0", "--source",
                "release", "--wheelhouse", str(tmp_path / "wh"), "--json"]
        data = _json(res := kc(_py(scratch), args, env={"KERNELCHECK_RELEASE_MIRROR": base}))
        # install's exit is its post-install doctor's verdict: fla-core (not asked for here) is still missing,
        # so the gated delta rule still falls back: FALLBACK, exit 3, never READY under a FALLBACK block
        status = {f["name"]: (f["status"], f.get("reason") or "") for f in data["functions"]}
        assert status["chunk_gated_delta_rule"][0] == "fallback" and "fla-core" in status["chunk_gated_delta_rule"][1]
        assert res.returncode == 3, res.stderr[-3000:]
        (step,) = data["plan"]
        assert step["source"] == "release" and step["artifact"].startswith(base)
        assert data["installed"][0]["so_arches"] == ["sm_90"]
        assert (tmp_path / "wh" / step["spec"]).exists()  # kept in the wheelhouse
        # a wheel upstream does not publish: HTTP 404 is a reason, not a crash
        (tmp_path / "wh2").mkdir(exist_ok=True)
        data = _json(res := kc(_py(scratch), [*args[:-3], "--wheelhouse", str(tmp_path / "wh2"), "--json",
                                              "--arch", "8.0", "--dry-run"],
                               env={"KERNELCHECK_RELEASE_MIRROR": base + "/nothing-here"}))
        httpd.shutdown()
    (step,) = data["plan"]
    assert res.returncode == 3 and step["action"] == "refuse"
    assert [r["kind"] for r in step["rejected"]] == ["release-missing"]
    # no network at all: also a reason
    (tmp_path / "wh3").mkdir(exist_ok=True)
    data = _json(res := kc(_py(scratch), [*args[:-3], "--wheelhouse", str(tmp_path / "wh3"), "--json", "--dry-run"],
                           env={"KERNELCHECK_RELEASE_MIRROR": "http://127.0.0.1:9"}))
    (step,) = data["plan"]
    assert res.returncode == 3 and [r["kind"] for r in step["rejected"]] == ["release-unreachable"]


def test_docker_stage_plan_on_a_bare_cuda_torch_builds_for_sm_90_and_installs_fla(cuda_venv: Path, tmp_path: Path):
    """A build stage: CUDA torch 2.14.1, no GPU, --arch 9.0, offline; the real causal-conv1d sdist, real
    fla-core/einops wheels and the build tools in the wheelhouse. The full sm_90 build takes far longer than
    CI allows on 2 cores, so this checks the plan; the overlay and a real compile of the sources are tested
    in test_install_artifacts.py and test_install_compile.py."""
    import shutil

    from tests.integration.test_install_artifacts import _build_tool_wheels, _real_sdist
    from tests.kcfixtures import pypi_wheels

    wh = tmp_path / "wh"
    wh.mkdir()
    shutil.copy(_real_sdist(), wh)
    for pat in ("fla_core-*.whl", "einops-*.whl"):
        for p in pypi_wheels().glob(pat):
            shutil.copy(p, wh)
    for p in _build_tool_wheels().glob("*.whl"):
        shutil.copy(p, wh)
    scratch = scratch_venv(cuda_venv, tmp_path / "s")
    res = kc(_py(scratch), ["install", "--model", MODEL, "--arch", "9.0", "--offline", "--wheelhouse", str(wh),
                            "--dry-run", "--json"])
    data = _json(res)
    steps = {s["package"]: s for s in data["plan"]}
    cc = steps["causal-conv1d"]
    assert cc["action"] == "build" and cc["arches"] == ["sm_90"] and "-std=c++20" in cc["command"], cc
    assert steps["fla-core"]["action"] == "install" and steps["fla-core"]["source"] == "wheelhouse"
    assert "torch" not in steps and "triton" not in steps
    assert res.returncode == 0, res.stderr[-2000:]
