"""Install decisions on artifacts as they really are: wheels exactly as PyPI publishes them, pip's own
resolver for a fix's dependency window, a real unlabelled extension tried against the installed torch,
and the real causal-conv1d 1.7.0 sdist's setup.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from kernelcheck.core.errors import BuildFailed
from kernelcheck.core.plan_step import RejectKind
from kernelcheck.install import build, plan, sources, wheels
from tests.kcfixtures import PY_TAG, make_wheel, pypi_wheels
from tests.unit.test_install_plan import env, steps_of

HOST = wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", 13, True, ("9.0",))


def _real(name: str) -> wheels.WheelInfo:
    (path,) = sorted(pypi_wheels().glob(f"{name}-*.whl"))
    info = wheels.inspect_wheel(path)
    assert info is not None
    return info


def test_pypi_wheels_as_published_fit_by_their_tags():
    tl = _real("tilelang")
    assert tl.name.filename == "tilelang-0.1.15-cp39-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    # abi3 from cp39 runs on every CPython >= 3.9, the compressed platform tag on this glibc
    assert wheels.tag_decision(tl.name.filename, PY_TAG, "linux_x86_64") is None
    assert wheels.tag_decision(tl.name.filename, "cp312", "linux_x86_64") is None  # the H200 image
    assert "this Python is cp38" in wheels.tag_decision(tl.name.filename, "cp38", "linux_x86_64")
    assert "linux_aarch64" in wheels.tag_decision(tl.name.filename, PY_TAG, "linux_aarch64")
    assert wheels.tag_decision(_real("fla_core").name.filename, PY_TAG, "linux_x86_64") is None
    z3 = _real("z3_solver")  # py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64
    assert wheels.tag_decision(z3.name.filename, PY_TAG, "linux_x86_64") is None
    cp312 = "causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl"  # the wheel built on the H200 by pip wheel
    why = wheels.tag_decision(cp312, "cp311", "linux_x86_64")
    assert why is not None and "built for cp312" in why  # wording: renderer test
    assert wheels.tag_decision(cp312, "cp312", "linux_x86_64") is None


def test_a_windows_fla_wheel_next_to_the_real_one_is_rejected_at_plan_time(tmp_path: Path):
    real = _real("fla_core")
    win = wheels.inspect_wheel(make_wheel(tmp_path, "fla-core", "0.6.1", py="cp39", plat="win_amd64",
                                          files={"fla/__init__.py": b""}, requires=("einops",)))
    ein = _real("einops")
    found = {"fla-core": plan.Candidates(wheels=(win, real)), "einops": plan.Candidates(wheels=(ein,))}
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="infer", arches=("9.0",)), found)
    (fla,) = steps_of(p, "fla-core")
    assert fla.action == "install" and fla.spec == "fla-core==0.6.0" and fla.artifact == real.path
    (rej,) = [r for r in fla.rejected if "0.6.1" in r.candidate]
    assert rej.kind == RejectKind.WHEEL_TAGS  # its tags (cp39, win_amd64) fit no Linux CPython here
    # the same for a dry run's prediction: only the Windows wheel -> refuse, not READY
    only = {"fla-core": plan.Candidates(wheels=(win,)), "einops": plan.Candidates(wheels=(ein,))}
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="infer", arches=("9.0",)), only)
    assert steps_of(p, "fla-core")[0].action == "refuse" and p.predicted == "fallback"


def test_train_mode_installs_tilelang_by_default_resolved_by_pip_with_its_window(tmp_path: Path):
    wh = pypi_wheels()
    window = "tilelang==0.1.15; apache-tvm-ffi>=0.1.11,<0.1.13; z3-solver>=4.13.0,<4.15.5"
    resolved, err, _ = sources.resolve_with_pip("tilelang", window, wh, True, tmp_path, None)
    assert err is None, err
    got = {w.name.name: w.name.version for w in resolved}
    assert got["tilelang"] == "0.1.15" and got["apache-tvm-ffi"] == "0.1.12" and got["z3-solver"] == "4.15.4.0"
    assert "torch" not in got and "numpy" not in got  # what is installed and fits stays (pins held)
    found = {"fla-core": plan.Candidates(wheels=(_real("fla_core"),)), "einops": plan.Candidates(wheels=(_real("einops"),)),  # noqa: E501
             "tilelang": plan.Candidates(resolved=tuple(resolved))}
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",)), found)
    (tl,) = steps_of(p, "tilelang")
    assert tl.action == "install" and tl.role == plan.Role.FIX  # the train fix, installed by default
    (fla,) = steps_of(p, "fla-core")
    assert fla.severity == "" and fla.rules == ()  # the fix leaves no breakage
    assert steps_of(p, "apache-tvm-ffi")[0].spec == "apache-tvm-ffi==0.1.12" and p.predicted == "ready"
    # opting out leaves the offer, and the plan says BROKEN (fla#640)
    p = plan.make_plan(env(), ("fla",), plan.Options(mode="train", arches=("9.0",), without=("tilelang",)), found)
    assert steps_of(p, "tilelang")[0].action == "offer" and p.predicted == "broken"
    assert steps_of(p, "fla-core")[0].rules == ("fla-640-refuses",)
    # a window pip cannot meet from this wheelhouse is a reason, not a crash
    _, err, _ = sources.resolve_with_pip("tilelang", "apache-tvm-ffi>=0.1.13", wh, True, tmp_path, None)
    assert err and "cannot resolve tilelang" in err and "offline" in err  # wording: renderer test



def test_a_fix_resolves_where_the_images_torch_already_fails_pip_check(tmp_path: Path):
    """Big images (the H200's holds jax, cupy and torch side by side) often ship a torch whose own declared
    requirements are not all met. pip then refuses any resolution that touches torch offline
    (ResolutionImpossible: it would need the missing requirement from an index). kernelcheck holds the
    pinned packages as installed and resolves the fix around them, and says so in the plan."""
    import json

    from tests.kcfixtures import REPO, scratch_venv

    scratch = scratch_venv(Path(sys.prefix), tmp_path / "s")
    py = scratch / "bin" / "python"
    old = tmp_path / "old"  # torch here requires fsspec>=0.8.5: a real older fsspec makes that unmet
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                          "fsspec==0.8.4", "-d", str(old)], capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"PyPI not reachable: {got.stderr[-300:]}")
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", *old.glob("*.whl")],
                   check=True)
    wh = pypi_wheels()
    window = "tilelang==0.1.15; apache-tvm-ffi>=0.1.11,<0.1.13; z3-solver>=4.13.0,<4.15.5"
    # what plain pip says in this environment: the failure the H200 install hit
    plain = subprocess.run([str(py), "-m", "pip", "install", "--dry-run", "--no-index", "--find-links", str(wh),
                            "tilelang==0.1.15"], capture_output=True, text=True)
    assert plain.returncode != 0 and "fsspec" in plain.stderr + plain.stdout
    prog = ("import json, sys; from pathlib import Path; from kernelcheck.install import sources; "
            "w, err, note = sources.resolve_with_pip('tilelang', sys.argv[1], Path(sys.argv[2]), True, "
            "Path(sys.argv[3]), None); print(json.dumps({'wheels': {x.name.name: x.name.version for x in w}, "
            "'err': err, 'note': note}))")
    res = subprocess.run([str(py), "-c", prog, window, str(wh), str(tmp_path / "dl")], capture_output=True,
                         text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["err"] is None, out["err"]
    assert out["wheels"]["tilelang"] == "0.1.15" and out["wheels"]["apache-tvm-ffi"] == "0.1.12"
    assert "torch" not in out["wheels"] and "fsspec" not in out["wheels"]  # held, left as it is
    from importlib.metadata import version

    assert f"torch {version('torch')} declares fsspec>=0.8.5" in out["note"] \
        and "pip check" in out["note"]  # wording: renderer test



def test_pins_use_the_version_pip_sees_when_torch_reports_a_local_label_its_metadata_lacks(tmp_path: Path):
    """The H200 image: `torch.__version__` is 2.11.0+cu130 but its dist-info says 2.11.0 (pip freeze:
    torch==2.11.0). A constraint `torch==2.11.0+cu130` matches nothing pip knows, so every resolution that
    touches torch (tilelang requires torch) ends in ResolutionImpossible. Reproduced here with this venv's
    real torch, its METADATA copied with the local label dropped, first on the path."""
    import json
    import re
    from importlib.metadata import distribution

    from packaging.version import Version

    from tests.kcfixtures import REPO

    real = distribution("torch")
    local = Version(real.version)
    if not local.local:
        pytest.skip(f"this torch ({real.version}) has no local label to drop")
    held = tmp_path / "image" / f"torch-{local.public}.dist-info"
    held.mkdir(parents=True)
    meta = re.sub(r"(?m)^Version: .*$", f"Version: {local.public}", real.read_text("METADATA") or "")
    (held / "METADATA").write_text(meta)
    # no pip config: this machine's /opt/wheels holds a torch wheel pip would otherwise reinstall torch from
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "image"), str(REPO)]), "PATH": "/usr/bin:/bin",
           "PIP_CONFIG_FILE": os.devnull}
    wh = pypi_wheels()
    cons = tmp_path / "as_reported.txt"
    cons.write_text(f"torch=={real.version}\n")
    plain = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links", str(wh),
                            "-c", str(cons), "tilelang==0.1.15"], capture_output=True, text=True, env=env)
    assert plain.returncode != 0 \
        and "ResolutionImpossible" in plain.stderr  # wording: pip's own message, as the H200 printed it on 2026-12-02
    prog = ("import json, sys; from pathlib import Path; from kernelcheck.core import environment; "
            "from kernelcheck.core import matrix; from kernelcheck.install import sources; "
            "e = environment.probe(m=matrix.load(), packages=False); "
            "pins = sources._constraints_file(e); "
            "w, err, note = sources.resolve_with_pip('tilelang', sys.argv[1], Path(sys.argv[2]), True, "
            "Path(sys.argv[3]), None, constraints=pins); "
            "print(json.dumps({'pins': pins.read_text(), 'reported': e.torch.version, "
            "'wheels': sorted(x.name.name for x in w), 'err': err}))")
    window = "tilelang==0.1.15; apache-tvm-ffi>=0.1.11,<0.1.13; z3-solver>=4.13.0,<4.15.5"
    res = subprocess.run([sys.executable, "-c", prog, window, str(wh), str(tmp_path / "dl")], capture_output=True,
                         text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["reported"] == real.version and f"torch=={local.public}\n" in out["pins"]
    assert out["err"] is None and "tilelang" in out["wheels"] and "torch" not in out["wheels"]


_UNDEF = r'''
#include <Python.h>
extern void _ZN3c1017torch_2_11_only_symbolEv(void);  /* what an extension built for another torch calls */
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%(name)s(void) { %(call)s return PyModule_Create(&m); }
'''


def _ext_wheel(folder: Path, name: str, call: str) -> wheels.WheelInfo:
    src = folder / f"{name}.c"
    folder.mkdir(parents=True, exist_ok=True)
    src.write_text(_UNDEF % {"name": name, "call": call})
    so = folder / f"{name}.so"
    inc = sysconfig.get_paths()["include"]
    res = subprocess.run(["gcc", "-shared", "-fPIC", f"-I{inc}", str(src), "-o", str(so)], capture_output=True,
                         text=True)
    if res.returncode != 0:
        pytest.skip(f"no C compiler: {res.stderr[-300:]}")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    path = make_wheel(folder, "causal-conv1d", "1.7.0", files={f"{name}{suffix}": so.read_bytes()})
    info = wheels.inspect_wheel(path)
    assert info is not None
    return info


def test_trial_import_of_an_unlabelled_extension_against_the_installed_torch(tmp_path: Path):
    good = _ext_wheel(tmp_path / "good", "causal_conv1d_cuda", "")
    t = sources.trial_import(good, "causal_conv1d_cuda", None, "2.14.1")
    assert t.ok and t.error == ""
    bad = _ext_wheel(tmp_path / "bad", "causal_conv1d_cuda", "_ZN3c1017torch_2_11_only_symbolEv();")
    t = sources.trial_import(bad, "causal_conv1d_cuda", None, "2.14.1")
    assert not t.ok and "undefined symbol" in t.error  # wording: the dynamic loader's own message
    # with GPU code for sm_90 (read from the .so), the trial decides, and says so either way
    gpu = wheels.WheelInfo(**{**good.__dict__, "so_arches": {"causal_conv1d_cuda.so": ("sm_90",)}})
    d = wheels.match(gpu, HOST, extension="causal_conv1d_cuda", trial=wheels.TrialImport("causal_conv1d_cuda", True, "", "2.14.1"))  # noqa: E501
    assert d.accepted and "unlabelled wheel verified" in d.reason and "sm_90" in d.reason  # wording: renderer test
    d = wheels.match(gpu, HOST, extension="causal_conv1d_cuda", trial=t)
    assert not d.accepted and d.kind == RejectKind.TRIAL_FAILED and t.error in d.reason  # the import's own error
    d = wheels.match(gpu, HOST, extension="causal_conv1d_cuda")
    assert not d.accepted and d.kind == RejectKind.NEEDS_TRIAL and d.needs_trial
    sm80 = wheels.WheelInfo(**{**good.__dict__, "so_arches": {"causal_conv1d_cuda.so": ("sm_80",)}})
    assert wheels.match(sm80, HOST, extension="causal_conv1d_cuda").kind == RejectKind.GPU_ARCH


def _real_sdist() -> Path:
    from tests.envs import CACHE
    from tests.integration.test_install_wheels import test_upstream_setup_py_patch_of_the_real_sdist as fetch

    fetch()
    return CACHE / "sdists" / "causal_conv1d-1.7.0.tar.gz"


def test_real_causal_conv1d_setup_py_gets_cxx20_for_torch_2_14():
    import tarfile

    with tarfile.open(_real_sdist()) as tf:
        text = tf.extractfile("causal_conv1d-1.7.0/setup.py").read().decode()
    assert text.count('"-std=c++17"') == 2  # g++ and nvcc, setup.py lines 209-212
    out, changed = build.patch_std(text, "2.14")
    assert changed == ("-std=c++17", "-std=c++17") and re.findall(r'"-std=(c\+\+\d+)"', out) == ["c++20", "c++20"]
    assert build.patch_std(text, "2.11") == (text, ())  # torch 2.11 headers take C++17: unchanged
    compile(build.patch_gencode(out, ("9.0",)).text, "setup.py", "exec")


def _build_tool_wheels() -> Path:
    from tests.envs import CACHE, cache_lock

    dest = CACHE / "pypi-build-tools"
    with cache_lock(dest.name):
        if not (dest / ".complete").exists():
            dest.mkdir(parents=True, exist_ok=True)
            res = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                                  ":all:", "-d", str(dest), "wheel", "ninja", "setuptools", "packaging"],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                pytest.skip(f"PyPI not reachable: {res.stderr[-300:]}")
            (dest / ".complete").write_text("ok\n")
    return dest


def test_build_overlay_provides_wheel_and_ninja_without_touching_the_environment(tmp_path: Path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # pip (+ setuptools), no wheel/ninja
    py = str(venv / "bin" / "python")
    freeze = [py, "-m", "pip", "freeze", "--all"]
    before = subprocess.run(freeze, capture_output=True, text=True, check=True).stdout
    said: list[str] = []
    add = build.provision_overlay(tmp_path / "overlay", _build_tool_wheels(), True, py, log=said.append)
    assert "wheel" in said[0] and "ninja" in said[0]  # wording: renderer test
    env = {"PYTHONPATH": add["PYTHONPATH"], "PATH": add["PATH"] + ":/usr/bin:/bin"}
    res = subprocess.run([py, "-c", "import wheel, ninja, shutil; print(ninja.__file__, shutil.which('ninja'))"],
                         env=env, capture_output=True, text=True)
    mod, binary = res.stdout.split()
    assert res.returncode == 0 and mod.startswith(str(tmp_path / "overlay")), res.stderr
    assert binary.startswith(str(tmp_path / "overlay")), binary  # MAX_JOBS works: torch finds this ninja
    assert subprocess.run(freeze, capture_output=True, text=True, check=True).stdout == before  # untouched
    # offline, with neither in the wheelhouse: wheel is required (refused), ninja only makes it serial
    with pytest.raises(BuildFailed, match="cannot provision wheel"):
        build.provision_overlay(tmp_path / "o2", tmp_path / "empty", True, py, tools=("wheel",), log=said.append)
