"""Print, as JSON, the extension modules an upstream setup.py (the CachedWheels scheme of mamba-ssm and
causal-conv1d) would build in this process's environment, without building anything.

argv[1]: the unpacked sdist folder; argv[2]: the CUDA version the build stands for ("13.0"). The setup.py runs
for real up to its `setup(...)` call, which is replaced by one that records its arguments; everything the setup.py
reads from the environment (its *_FORCE_BUILD / *_SKIP_CUDA_BUILD / *_KEEP_CUDA_BUILD switches) it reads here.
On a CPU torch two facts are stood in for, and only those: `torch.version.cuda` (None on a CPU build; the setup.py
parses it) is argv[2], and CUDA_HOME is a folder whose bin/nvcc prints that release (the setup.py runs `nvcc -V`).
When `wheel` is not importable (setup.py imports wheel.bdist_wheel) setuptools' own bdist_wheel stands in.
"""

import json
import os
import runpy
import sys
import tempfile
import types
from pathlib import Path

import setuptools
import torch
import torch.utils.cpp_extension as cpp_extension

src, cuda = Path(sys.argv[1]).resolve(), sys.argv[2]
home = Path(tempfile.mkdtemp(prefix="fake-cuda-home-"))
(home / "bin").mkdir()
nvcc = home / "bin" / "nvcc"
nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {cuda}, V{cuda}.0'\n")
nvcc.chmod(0o755)
torch.version.cuda = cuda
cpp_extension.CUDA_HOME = str(home)
try:
    import wheel.bdist_wheel  # noqa: F401
except ImportError:
    from setuptools.command.bdist_wheel import bdist_wheel

    shim = types.ModuleType("wheel.bdist_wheel")
    shim.bdist_wheel = bdist_wheel  # type: ignore[attr-defined]
    sys.modules["wheel"] = types.ModuleType("wheel")
    sys.modules["wheel.bdist_wheel"] = shim
seen: dict = {}
setuptools.setup = lambda **kw: seen.update(kw)  # type: ignore[assignment]
os.chdir(src)
sys.path.insert(0, str(src))
runpy.run_path(str(src / "setup.py"), run_name="__main__")
print(json.dumps({"version": seen.get("version"),
                  "ext_modules": [e.name for e in seen.get("ext_modules") or []],
                  "nvcc_flags": [f for e in seen.get("ext_modules") or [] for f in e.extra_compile_args["nvcc"]
                                 if f.startswith("arch=")]}))
