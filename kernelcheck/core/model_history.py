"""A model type's family in older transformers releases (matrix/models.toml `earlier`): the layers of one
model_type may call other fast functions from one transformers release to the next (Falcon-Mamba and Jamba
dropped the fused mamba_inner_fn in 5.25.0), so the data says which family held before which release."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from packaging.version import InvalidVersion, Version

Earlier = tuple[tuple[str, str, tuple[str, ...]], ...]  # (before, family, its functions)


def earlier_from(entries: Any, families: dict[str, Any], bad: Callable[[str], Exception]) -> Earlier:
    """`earlier = [{before = "5.25.0", family = "mamba1"}]`, validated; `bad(what)` is the error to raise."""
    out = []
    for e in entries if isinstance(entries, list) else [entries]:
        if not isinstance(e, dict) or set(e) != {"before", "family"} or e["family"] not in families:
            raise bad("each entry needs exactly `before` (a transformers version) and `family` (a [families.*] "
                      "table of models.toml)")
        try:
            Version(str(e["before"]))
        except InvalidVersion:
            raise bad(f"before: {e['before']!r} is not a version") from None
        out.append((str(e["before"]), str(e["family"]), tuple(families[e["family"]]["functions"])))
    return tuple(sorted(out, key=lambda x: Version(x[0])))


def family_at(earlier: Earlier, transformers_version: str | None) -> tuple[str, tuple[str, ...]] | None:
    """(family, functions) for a transformers release older than an `earlier` entry's `before` (the oldest such
    entry wins); None when the current family holds (newer releases, or no version known)."""
    try:
        have = Version(Version((transformers_version or "").split("+")[0]).base_version)
    except InvalidVersion:
        return None
    for before, family, functions in earlier:
        if have < Version(before):
            return family, functions
    return None
