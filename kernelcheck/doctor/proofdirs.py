"""Where doctor's stored proofs live: a subfolder of KERNELCHECK_HOME (read and written on this node), then the same
subfolder of KERNELCHECK_PROOF_DIR (proofs baked into the image by `kernelcheck warm`, read only)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelcheck.core import settings

Read = Callable[[Path, str], "dict[str, Any] | None"]


def home(sub: str) -> Path:
    return settings.current().home / sub


def baked(sub: str) -> Path | None:
    base = settings.current().proof_dir
    return None if base is None else base / sub


def lookup(sub: str, key: str, read: Read) -> dict[str, Any] | None:
    """The proof stored for `key`, read by `read(path, key)`: this node's, else the baked one (`baked` True)."""
    got = read(home(sub) / f"{key}.json", key)
    if got is None and (folder := baked(sub)) is not None:
        got = read(folder / f"{key}.json", key)
        if got is not None:
            got["baked"] = True
    return got
