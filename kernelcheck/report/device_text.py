"""The words for a verdict's device (core/device.py's Device), one copy for every section that names it: the
headline of doctor, verify, hub and forecasts, and the Hub section's listing line."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelcheck.core.device import Device

ORIGIN_WORDS = {"flag": "--device", "arch": "--arch", "target": "the target build", "run-here": "where it runs",
                "gpu-visible": "the GPU here", "torch-build": "the torch build"}


def origin_words(origin: str) -> str:
    """Where a device came from, as "from ..." says it: "--device", "the torch build"."""
    return ORIGIN_WORDS.get(origin, origin)


def device_words(device: Device) -> str:
    """The headline's device: "device cpu (from the torch build)"; a prediction says it is one."""
    said = f"device {device.type} (from {origin_words(device.origin)}"
    if device.predicted:
        kind = device.type.upper()
        return said + f"; no {kind} device here: the verdict is a prediction for a {kind} machine)"
    return said + ")"
