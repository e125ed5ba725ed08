"""Real artifacts for the install tests: a CUDA torch venv, scratch venvs, wheels, an sdist.

No mocks: wheels are real zip files pip installs, their .so files are real Python extension modules
compiled by nvcc for the arches asked for (so the fatbin reader reads real device code), and the
sdist builds a real CUDA extension through torch.utils.cpp_extension. Only the GPU is missing here;
`--arch 9.0` stands in for it, as in a docker build stage.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.envs import CACHE, REPO, cache_lock, progress

TORCH_CUDA = os.environ.get("KERNELCHECK_TEST_CUDA_TORCH", "torch==2.14.1")
PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def have_nvcc() -> bool:
    return shutil.which("nvcc") is not None


def cuda_torch_venv() -> Path:
    """A venv with a CUDA build of torch (2.14.1, CUDA 13), transformers and kernelcheck's deps; cached."""
    root = CACHE / f"venv-{TORCH_CUDA.replace('==', '-')}-{PY_TAG}"
    py = root / "bin" / "python"
    if (root / ".complete").exists():
        return root
    with cache_lock(root.name):
        if (root / ".complete").exists():
            return root
        return _build_cuda_torch_venv(root, py)


def _build_cuda_torch_venv(root: Path, py: Path) -> Path:
    progress(f"building the CUDA torch venv {root} ({TORCH_CUDA}, several GB; once, cached for later runs)")
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    res = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", TORCH_CUDA,
                          "transformers==5.24.0", "click", "requests", "packaging", "wheel", "setuptools>=77"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"could not build the CUDA torch venv: {res.stderr[-2000:]}")
    (root / ".complete").write_text(TORCH_CUDA)
    return root


def site_packages(venv: Path) -> Path:
    py = venv / "bin" / "python"
    out = subprocess.run([str(py), "-c", "import sysconfig;print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def scratch_venv(base: Path, where: Path) -> Path:
    """A throwaway venv that sees `base`'s packages (torch ...) through a .pth file but installs into itself."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    sp = site_packages(where)
    (sp / "zz_base_env.pth").write_text(str(site_packages(base)) + "\n")
    return where


def kc(python: Path, args: list[str], env: dict[str, str] | None = None, timeout: float = 900,
       cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m kernelcheck ARGS` with this checkout's kernelcheck."""
    e = dict(os.environ)
    e.pop("KERNELCHECK_DEBUG", None)
    e["PYTHONPATH"] = str(REPO)
    e["HF_HUB_OFFLINE"] = "1"
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e.update(env or {})
    return subprocess.run([str(python), "-m", "kernelcheck", *args], capture_output=True, text=True, env=e,
                          timeout=timeout, cwd=str(cwd or REPO))


# ---------------------------------------------------------------- extension .so files

_EXT_SRC = r"""
#include <Python.h>
__global__ void kc_add_one(float* x) { x[threadIdx.x] += 1.0f; }
static PyModuleDef mod = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%(name)s(void) { return PyModule_Create(&mod); }
"""


def extension_so(arches: tuple[int, ...], name: str = "causal_conv1d_cuda", ptx: bool = False) -> bytes:
    """A real Python extension module with SASS for `arches` (nvcc, cached by arch list)."""
    key = f"{name}-{'_'.join(map(str, arches))}{'-ptx' if ptx else ''}"
    out = CACHE / "so" / f"{key}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        src = out.with_suffix(".cu")
        src.write_text(_EXT_SRC % {"name": name})
        cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(src),
               "-o", str(out)]
        for a in arches:
            cmd += ["-gencode", f"arch=compute_{a},code={'compute' if ptx else 'sm'}_{a}"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            pytest.fail(f"nvcc failed: {res.stderr[-1500:]}")
    return out.read_bytes()


# ---------------------------------------------------------------- wheels and sdists

def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(folder: Path, dist: str, version: str, *, py: str = PY_TAG, abi: str | None = None,
               plat: str = "linux_x86_64", files: dict[str, bytes] | None = None,
               requires: tuple[str, ...] = (), filename: str | None = None) -> Path:
    """A real, pip-installable wheel."""
    folder.mkdir(parents=True, exist_ok=True)
    norm = dist.replace("-", "_")
    abi = abi or (py if py.startswith("cp") else "none")
    di = f"{norm}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    purelib = "true" if py == "py3" else "false"
    wheel_meta = (f"Wheel-Version: 1.0\nGenerator: kernelcheck-tests\nRoot-Is-Purelib: {purelib}\n"
                  f"Tag: {py}-{abi}-{plat}\n")
    members = dict(files or {})
    members[f"{di}/METADATA"] = meta.encode()
    members[f"{di}/WHEEL"] = wheel_meta.encode()
    record = [_record_line(n, d) for n, d in members.items()] + [f"{di}/RECORD,,"]
    members[f"{di}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / (filename or f"{norm}-{version}-{py}-{abi}-{plat}.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    return path


def causal_conv1d_wheel(folder: Path, *, version: str = "1.7.0", local: str = "cu13torch2.14cxx11abiTRUE",
                        arches: tuple[int, ...] = (90,), py: str = PY_TAG, plat: str = "linux_x86_64") -> Path:
    so = extension_so(arches)
    files = {
        "causal_conv1d/__init__.py": f"__version__ = '{version}'\n".encode(),
        f"causal_conv1d_cuda.cpython-{sys.version_info.major}{sys.version_info.minor}-x86_64-linux-gnu.so": so,
    }
    full = f"{version}+{local}" if local else version
    return make_wheel(folder, "causal-conv1d", full, py=py, plat=plat, files=files,
                      requires=("torch", "packaging", "ninja"))


_TINY_SETUP = r'''
# A causal-conv1d-shaped setup.py: hard-coded -gencode pairs (ignores TORCH_CUDA_ARCH_LIST), the
# CachedWheels env switches, a CUDA extension named causal_conv1d_cuda. One tiny kernel, so nvcc is quick.
import os, re, ast
from pathlib import Path
from setuptools import setup, find_packages
import torch
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

this_dir = os.path.dirname(os.path.abspath(__file__))
FORCE_BUILD = os.getenv("CAUSAL_CONV1D_FORCE_BUILD", "FALSE") == "TRUE"
if not FORCE_BUILD:
    raise SystemExit("this test sdist only builds with CAUSAL_CONV1D_FORCE_BUILD=TRUE (no wheel guessing)")
cc_flag = []
cc_flag.append("-gencode")
cc_flag.append("arch=compute_75,code=sm_75")
cc_flag.append("-gencode")
cc_flag.append("arch=compute_80,code=sm_80")
if True:  # upstream: if bare_metal_version >= Version("11.8")
    cc_flag.append("-gencode")
    cc_flag.append("arch=compute_90,code=sm_90")

def get_package_version():
    with open(Path(this_dir) / "causal_conv1d" / "__init__.py") as f:
        public = ast.literal_eval(re.search(r"^__version__\s*=\s*(.*)$", f.read(), re.M).group(1))
    local = os.environ.get("CAUSAL_CONV1D_LOCAL_VERSION")
    return f"{public}+{local}" if local else str(public)

setup(
    name="causal_conv1d",
    version=get_package_version(),
    packages=find_packages(exclude=("csrc",)),
    ext_modules=[CUDAExtension(name="causal_conv1d_cuda", sources=["csrc/module.cpp", "csrc/kernel.cu"],
                               extra_compile_args={"cxx": ["-O1"], "nvcc": ["-O1"] + cc_flag})],
    cmdclass={"build_ext": BuildExtension},
    install_requires=["torch", "packaging", "ninja"],
)
'''

_TINY_CPP = r'''
#include <Python.h>
void kc_launch(float* x, int n);
static PyModuleDef mod = {PyModuleDef_HEAD_INIT, "causal_conv1d_cuda", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_causal_conv1d_cuda(void) { return PyModule_Create(&mod); }
'''

_TINY_CU = r'''
__global__ void kc_add_one(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
void kc_launch(float* x, int n) { kc_add_one<<<(n + 127) / 128, 128>>>(x, n); }
'''


def tiny_sdist(folder: Path, version: str = "1.7.0", broken: bool = False) -> Path:
    """causal_conv1d-VERSION.tar.gz with the upstream setup.py shape and one tiny kernel."""
    folder.mkdir(parents=True, exist_ok=True)
    top = f"causal_conv1d-{version}"
    files = {
        f"{top}/setup.py": _TINY_SETUP,
        f"{top}/causal_conv1d/__init__.py": f"__version__ = '{version}'\n",
        f"{top}/csrc/module.cpp": _TINY_CPP,
        f"{top}/csrc/kernel.cu": _TINY_CU + ("\nthis is not C++;\n" if broken else ""),
        f"{top}/PKG-INFO": f"Metadata-Version: 2.1\nName: causal_conv1d\nVersion: {version}\n",
    }
    path = folder / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(data))
    return path


# ---------------------------------------------------------------- wheels exactly as PyPI publishes them

PYPI_WHEELS = ("fla-core==0.6.0", "einops==0.8.2", "tilelang==0.1.15", "apache-tvm-ffi==0.1.12",
               "torch-c-dlpack-ext==0.1.5", "z3-solver==4.15.4.0", "cloudpickle", "ml-dtypes", "tqdm", "psutil",
               "numpy", "typing-extensions")


def pypi_wheels() -> Path:
    """Real PyPI wheels for this Python (tilelang 0.1.15 cp39-abi3 manylinux, fla-core py3-none-any, the
    tilelang dependency window ...), `pip download --no-deps` once into the test cache."""
    dest = CACHE / f"pypi-wheels-cp{sys.version_info.major}{sys.version_info.minor}"
    done = dest / ".complete"
    if done.exists():
        return dest
    with cache_lock(dest.name):
        if done.exists():
            return dest
        progress(f"downloading real PyPI wheels into {dest} (about 100 MB, once)")
        dest.mkdir(parents=True, exist_ok=True)
        res = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                              ":all:", "-d", str(dest), *PYPI_WHEELS], capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"PyPI not reachable for the real-wheel tests: {res.stderr[-500:]}")
        done.write_text("ok\n")
    return dest
