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


def target_path(target: str | os.PathLike[str]) -> Path:
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

