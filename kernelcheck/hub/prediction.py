"""Which Hub repositories' failing offline load was seen on a GPU (matrix/hub_offline.toml): a prediction of
hub-not-listable for a device not visible here says when its repository is not among them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def confirmed_repos(*, m: Matrix) -> frozenset[str]:
    """The repositories `m`'s hub_offline.toml lists as confirmed on a GPU."""
    return frozenset(str(e["repo"]) for e in m.table("hub_offline.toml").get("confirmed", []))
