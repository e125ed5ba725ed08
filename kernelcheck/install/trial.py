"""A trial import of a candidate wheel against the installed torch, in a fresh process from a scratch folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from kernelcheck.core import lifeline
from kernelcheck.install import wheels


def trial_import(wheel: wheels.WheelInfo, module: str, target: str | None, torch_version: str) -> wheels.TrialImport:
    """Unpack `wheel` into a scratch folder and import `module` (after torch) in a fresh process, run from
    another scratch folder so nothing in the working directory shadows it."""
    with tempfile.TemporaryDirectory(prefix="kernelcheck-trial-") as tmp:
        root, cwd = Path(tmp) / "site", Path(tmp) / "cwd"
        cwd.mkdir()
        try:
            with zipfile.ZipFile(wheel.path) as zf:
                zf.extractall(root)
        except (zipfile.BadZipFile, OSError) as exc:
            return wheels.TrialImport(module, False, f"cannot unpack: {exc}", torch_version)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(root), *([target] if target else []),
                                             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        code = f"import torch\nimport {module}\n"
        try:
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                 cwd=str(cwd), timeout=300,
                                 preexec_fn=lifeline.preexec())
        except (OSError, subprocess.SubprocessError) as exc:
            return wheels.TrialImport(module, False, str(exc), torch_version)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    return wheels.TrialImport(module, res.returncode == 0, "" if res.returncode == 0 else
                              (lines[-1] if lines else f"exit {res.returncode}")[:300], torch_version)


