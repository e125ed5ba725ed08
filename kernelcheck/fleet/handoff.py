"""How a command's finished report reaches the fleet gate instead of stdout (one context variable)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

_BOX: ContextVar[list[Any] | None] = ContextVar("kernelcheck_fleet_box", default=None)


def take(report: Any) -> bool:
    """Called where a command would print its report: True when a fleet gate collects it instead."""
    box = _BOX.get()
    if box is None:
        return False
    box.append(report)
    return True


@contextlib.contextmanager
def collecting() -> Iterator[list[Any]]:
    box: list[Any] = []
    token = _BOX.set(box)
    try:
        yield box
    finally:
        _BOX.reset(token)
