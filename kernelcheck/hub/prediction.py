"""Which Hub repositories' failing offline load was seen on a GPU (matrix/hub_offline.toml): a prediction of
hub-not-listable for a device not visible here says when its repository is not among them."""

from __future__ import annotations

import functools

from kernelcheck.core import matrix


@functools.cache
def confirmed_repos() -> frozenset[str]:
    """The repositories matrix/hub_offline.toml lists as confirmed on a GPU."""
    return frozenset(str(e["repo"]) for e in matrix.table("hub_offline.toml").get("confirmed", []))
