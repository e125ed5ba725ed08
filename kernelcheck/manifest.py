"""The install manifest: what kernelcheck installed into this environment, and how.

One JSON file per Python environment (sys.prefix), overridable with KERNELCHECK_MANIFEST.
doctor reads it to explain mismatches (built for another torch, built by which nvcc, for which arches).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def path() -> Path:
    if os.environ.get("KERNELCHECK_MANIFEST"):
        return Path(os.environ["KERNELCHECK_MANIFEST"])
    return Path(sys.prefix) / "share" / "kernelcheck" / "manifest.json"


def read() -> dict[str, Any]:
    p = path()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {"packages": {}}
    if not isinstance(data, dict) or not isinstance(data.get("packages"), dict):
        return {"packages": {}}
    return data


def record(package: str, entry: dict[str, Any]) -> Path:
    """Add or replace one package's entry, atomically."""
    data = read()
    data["packages"][package] = entry
    p = path()
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".manifest-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
    os.replace(tmp, p)
    return p


def built_nvcc() -> dict[str, str]:
    return {k: v.get("nvcc", "") for k, v in read()["packages"].items() if v.get("nvcc")}
