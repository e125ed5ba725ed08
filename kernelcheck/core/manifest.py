"""The install manifest: what kernelcheck installed into this environment, and how.

One JSON file per Python environment (sys.prefix/share/kernelcheck/manifest.json), overridable with
KERNELCHECK_MANIFEST; an install with `--target DIR` writes DIR/.kernelcheck-manifest.json, found again
through sys.path (PYTHONPATH=DIR). doctor reads it to explain mismatches (built for another torch,
built by which nvcc, for which arches).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelcheck.core import settings

TARGET_NAME = ".kernelcheck-manifest.json"


def path() -> Path:
    return settings.current().manifest_path


def target_path(target: str | os.PathLike) -> Path:
    """The manifest of packages installed with `pip install --target DIR`."""
    return Path(target) / TARGET_NAME


def _read_one(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {"packages": {}}
    if not isinstance(data, dict) or not isinstance(data.get("packages"), dict):
        return {"packages": {}}
    return data


def read() -> dict[str, Any]:
    """The environment's manifest, plus those of --target folders on sys.path (earlier paths win)."""
    data = _read_one(path())
    for entry in sys.path:
        if entry and os.path.isfile(os.path.join(entry, TARGET_NAME)):
            for k, v in _read_one(Path(entry) / TARGET_NAME)["packages"].items():
                data["packages"].setdefault(k, v)
    return data


def record(package: str, entry: dict[str, Any], at: Path | None = None) -> Path:
    """Add or replace one package's entry, atomically."""
    p = at or path()
    data = _read_one(p)
    data["packages"][package] = entry
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".manifest-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
    os.replace(tmp, p)
    return p


def built_nvcc() -> dict[str, str]:
    return {k: v.get("nvcc", "") for k, v in read()["packages"].items() if v.get("nvcc")}


def explain(env: Any) -> list[Any]:
    """Findings where the environment no longer fits what kernelcheck installed (manifest vs now)."""
    from kernelcheck.core.environment import torch_minor
    from kernelcheck.install.wheels import arch_serves, cap_to_sm
    from kernelcheck.report.model import Finding

    out = []
    torch_v = env.torch.version if env.torch else None
    mm = torch_minor(torch_v)
    for name, e in read()["packages"].items():
        st = env.packages.get(name)
        dist = e.get("distribution", name)
        how = f"{dist} {e.get('version')} was installed by kernelcheck from {e.get('source')} ({e.get('wheel')}"
        how += f", GPU code {', '.join(e['so_arches'])})" if e.get("so_arches") else ")"
        fix = f"kernelcheck install --model M --source build --package {dist}"
        if st is not None and st.installed and st.version and e.get("version") and st.version != e["version"]:
            out.append(Finding("manifest-replaced", "info", f"{how}; {dist} {st.version} is installed now: "
                               "something else replaced it after kernelcheck's install."))
            continue
        if e.get("so_arches") and mm and e.get("torch_mm") and e["torch_mm"] != mm:
            out.append(Finding("manifest-torch-changed", "warning",
                               f"{how}, built for torch {e['torch_mm']}; torch is now {torch_v}: a compiled "
                               "extension is tied to one torch minor (expect 'undefined symbol').", fix))
        if e.get("so_arches"):
            for cap in env.capabilities:
                if arch_serves(tuple(e["so_arches"]), cap) is None:
                    out.append(Finding("manifest-arch-missing", "warning",
                                       f"{how}; this GPU is sm_{cap_to_sm(cap)}, which that build does not carry: "
                                       "its kernels cannot run here.", fix + f" --arch {cap}"))
    return out
