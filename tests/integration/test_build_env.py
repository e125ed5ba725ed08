"""The real mamba-ssm sdists' setup.py, run with the environment and the patched setup.py of kernelcheck's source
build (install/build.py `build_environ`, `patch_gencode`, `patch_std`), up to its `setup(...)` call: which extension
modules and which `-gencode` targets it would compile. Nothing is compiled (tests/programs/setup_ext_modules.py
records setup()'s arguments; on this CPU torch it stands in torch.version.cuda and an nvcc that prints 13.0).

mamba-ssm's main (mamba#977) builds selective_scan_cuda only with MAMBA_KEEP_CUDA_BUILD=TRUE; no PyPI sdist contains
it yet (2.3.2.post1 is the newest), so the variable itself is checked in tests/unit/test_build_env.py, and here the
released setup.py files show that the build keeps the extension even when the user's environment says
MAMBA_SKIP_CUDA_BUILD=TRUE (as for a `pip download` of the sdist), which without kernelcheck's switches builds none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.install import build

pytestmark = pytest.mark.integration

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "setup_ext_modules.py"


def _sdist(version: str) -> Path:
    from tests.envs import CACHE, cache_lock

    name = f"mamba_ssm-{version}.tar.gz"
    carried = Path(__file__).resolve().parents[2] / ".carry" / name
    if carried.exists():
        return carried
    dest = CACHE / "sdists"
    dest.mkdir(parents=True, exist_ok=True)
    with cache_lock("sdists"):
        if not (dest / name).exists():
            # only downloaded: its metadata step must not build, so no CUDA torch is needed
            res = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
                                  ":all:", "--no-build-isolation", f"mamba-ssm=={version}", "-d", str(dest)],
                                 capture_output=True, text=True,
                                 env={**os.environ, "MAMBA_SKIP_CUDA_BUILD": "TRUE", "MAMBA_FORCE_BUILD": "TRUE"})
            assert res.returncode == 0, res.stderr[-2000:]
    return dest / name


def _what_setup_builds(src: Path, env: dict[str, str]) -> dict:
    res = subprocess.run([sys.executable, str(PROGRAM), str(src), "13.0"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("version", ["2.3.2.post1", "2.2.6.post3"])
def test_the_build_environment_makes_the_real_setup_py_build_selective_scan_cuda_for_the_target_only(
        version: str, tmp_path: Path):
    sdist = _sdist(version)
    with tarfile.open(sdist) as tf:
        assert f"mamba_ssm-{version}/setup.py" in tf.getnames()
    src = build._unpack(sdist, tmp_path / "src")
    setup_py = src / "setup.py"
    patched = build.patch_gencode(setup_py.read_text(encoding="utf-8"), ("9.0",))
    setup_py.write_text(build.patch_std(patched.text, "2.13")[0], encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    pkg = matrix.load().packages["mamba_ssm"]
    user = {**os.environ, "MAMBA_SKIP_CUDA_BUILD": "TRUE"}  # left over from a `pip download` of the sdist
    env = build.build_environ(user, env_prefix=pkg.env_prefix, package_env=pkg.build_env, arches=("9.0",),
                              torch_mm="2.13", cuda_major=13, cxx11abi=True, jobs=1, tmp=tmp_path)
    got = _what_setup_builds(src, env)
    assert got == {"version": f"{version}+cu13torch2.13cxx11abiTRUE", "ext_modules": ["selective_scan_cuda"],
                   "nvcc_flags": ["arch=compute_90,code=sm_90"]}
    # the same setup.py with the user's environment alone builds no extension: what SKIP_CUDA_BUILD=FALSE prevents
    assert _what_setup_builds(src, user)["ext_modules"] == []
