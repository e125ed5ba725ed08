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
from kernelcheck.core.errors import BadInput

TARGET_NAME = ".kernelcheck-manifest.json"


def path() -> Path:
    return settings.current().manifest_path


def target_path(target: str | os.PathLike[str]) -> Path:
    """The manifest of packages installed with `pip install --target DIR`."""
    return Path(target) / TARGET_NAME


MAX_BYTES = 16 << 20  # a manifest holds a few entries; anything near this is not one
# the keys an entry's readers take (doctor/drift.py, forecast/drift.py, built_nvcc), with the types they expect
_TEXT_KEYS = ("distribution", "version", "source", "wheel", "torch_mm", "nvcc", "spec", "torch", "cuda", "python",
              "platform", "triton", "transformers", "installed_at", "site", "kernelcheck", "sha256")
_LIST_KEYS = ("so_arches", "target_arches")


def _bad(p: Path, key: str, what: str) -> BadInput:
    return BadInput(f"the install manifest {p}: {key}: {what}. It is kernelcheck's record of what it installed "
                    "(KERNELCHECK_MANIFEST, or a --target folder's .kernelcheck-manifest.json on sys.path); delete "
                    "the file, or restore it from a backup, and rerun (`kernelcheck install` writes it again).")


def _entry_problem(entry: Any) -> tuple[str, str] | None:
    """(the key, what is wrong) for one package's entry, or None."""
    if not isinstance(entry, dict):
        return "", f"not an object but {type(entry).__name__}"
    for key in _TEXT_KEYS:
        if key in entry and entry[key] is not None and not isinstance(entry[key], str):
            return key, f"not a string but {type(entry[key]).__name__}"
    for key in _LIST_KEYS:
        v = entry.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            return key, "not a list of strings"
    return None


def parse(text: bytes, p: Path) -> dict[str, Any]:
    """A manifest's bytes, validated: {"packages": {name: entry}}; BadInput naming `p` and the key at fault."""
    if len(text) > MAX_BYTES:
        raise _bad(p, "(whole file)", f"{len(text)} bytes, far more than a manifest holds")
    try:
        data = json.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise _bad(p, "(whole file)", "not UTF-8 text (binary data)") from None
    except RecursionError:
        raise _bad(p, "(whole file)", "nested too deeply to be a manifest") from None
    except ValueError as exc:
        raise _bad(p, "(whole file)", f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _bad(p, "(top level)", f"not an object but {type(data).__name__}")
    packages = data.get("packages", {})
    if not isinstance(packages, dict):
        raise _bad(p, "packages", f"not an object but {type(packages).__name__}")
    for name, entry in packages.items():
        if (problem := _entry_problem(entry)) is not None:
            raise _bad(p, f"packages.{name}" + (f".{problem[0]}" if problem[0] else ""), problem[1])
    return {**data, "packages": dict(packages)}


def _read_one(p: Path) -> dict[str, Any]:
    """The manifest at `p`: empty when there is none; BadInput when it is there and not a manifest."""
    try:
        with open(p, "rb") as fh:
            text = fh.read(MAX_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return {"packages": {}}
    except OSError as exc:
        raise _bad(p, "(whole file)", f"not readable ({exc.strerror or exc})") from None
    return parse(text, p)


def check(p: Path) -> None:
    """BadInput now when the manifest an install will add to is not one (before pip changes anything)."""
    _read_one(p)


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

