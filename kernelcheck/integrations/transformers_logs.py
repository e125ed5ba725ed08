"""transformers' own log lines that kernelcheck's measurements cause and must not print.

When verify runs a model on the torch path on purpose (CPU, `verify --packing`), transformers logs, once per
process, that a function "is falling back to its reference PyTorch implementation because ... is not
installed" (5.17-5.24; 5.25: "... either not installed or doesn't support the device"; <= 5.14: "The fast
path is not available ..."). The measurement already says which path ran, so these lines are held back
while it runs and counted (`--verbose` logs them). The logger names and texts are transformers' internals;
an unknown layout only means a line may get through.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

# a filter acts on records of its own logger only: the modules that log these lines, by name (getLogger makes
# the logger before transformers imports the module, and transformers then gets the same object)
_LOGGERS = ("transformers.integrations.hub_kernels", "transformers.models.qwen3_5.modeling_qwen3_5",
            "transformers.models.qwen3_next.modeling_qwen3_next")
_TEXTS = ("falling back to its reference PyTorch implementation", "The fast path is not available")


class _Hold(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.held: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if any(t in msg for t in _TEXTS):
            self.held.append(msg)
            log.info("transformers (held back): %s", msg)
            return False
        return True


def _loggers() -> list[logging.Logger]:
    return [logging.getLogger(n) for n in _LOGGERS]


@contextmanager
def quiet_fallback_lines() -> Iterator[list[str]]:
    """Hold back transformers' fallback lines inside the block; yields the list of those held."""
    hold = _Hold()
    targets = _loggers()
    for lg in targets:
        lg.addFilter(hold)
    try:
        yield hold.held
    finally:
        for lg in targets:
            lg.removeFilter(hold)
