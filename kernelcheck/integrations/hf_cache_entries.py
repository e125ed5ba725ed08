"""Damaged entries of the Hugging Face cache, read without trusting them: a refs file (a commit hash, at most
REF_MAX bytes read) and huggingface_hub's cached tree listing (trees/COMMIT.json). A damaged one is a reason naming
the file (a finding), never an exception that ends a gate as exit 1."""

from __future__ import annotations

import json
import re
from pathlib import Path

_HEX40 = re.compile(r"^[0-9a-f]{40}$")
REF_MAX = 256  # bytes read of a refs file: a commit hash is 40; a longer file is damaged, never read whole
REPAIR = ("a full disk or an interrupted download leaves a cache entry so; `kernelcheck hub --prefetch` online, or "
          "removing the folder and downloading again, repairs it")


def read_ref(path: Path) -> tuple[str | None, str]:
    """(commit, "") from a refs file of the HF cache, or (None, why) for a damaged one (not a 40-hex commit:
    binary, huge, empty, unreadable): a finding naming the file, never an exception in a gate."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(REF_MAX + 1)
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror or exc}): a damaged cache entry; {REPAIR}"
    text = raw.decode("ascii", errors="replace").strip()
    if len(raw) > REF_MAX or not _HEX40.match(text) or len(text) != 40:
        what = ("over 256 bytes" if len(raw) > REF_MAX else f"{text[:20]!r}" if text.isprintable()
                else f"{len(raw)} bytes that are not text")
        return None, f"{path} is not a commit hash ({what}): a damaged cache entry; {REPAIR}"
    return text, ""


def tree_problem(tree: Path) -> tuple[list[str] | None, str]:
    """(file names, "") from huggingface_hub's cached tree listing `tree` (None when there is none), or
    (None, why) for a damaged one: not JSON, nested past reading, or not {"files": {...} or [...]}."""
    try:
        if not tree.is_file():
            return None, ""
        data = json.loads(tree.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, f"{tree} cannot be read ({exc.strerror or exc}): a damaged cache entry; {REPAIR}"
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else f"not JSON: {str(exc)[:80]}"
        return None, f"{tree} is {why}: a damaged cache entry; {REPAIR}"
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, (dict, list)) or not all(isinstance(f, str) for f in files):
        return None, (f"{tree} is not a file listing ({{\"files\": ...}} holding names): a damaged cache entry; "
                      f"{REPAIR}")
    return list(files), ""
