"""doctor and hub name the job's device type with one flag, --device (doctor also takes --hub-device)."""

from __future__ import annotations

import click
import pytest

from kernelcheck.cli.doctor import doctor
from kernelcheck.cli.hub import hub


def _parsed(cmd: click.Command, args: list[str]) -> dict[str, object]:
    return cmd.make_context(cmd.name, args, resilient_parsing=True).params


@pytest.mark.parametrize(("cmd", "dest"), [(doctor, "hub_device"), (hub, "device")])
def test_both_commands_take_device(cmd: click.Command, dest: str) -> None:
    assert _parsed(cmd, ["--device", "cuda"])[dest] == "cuda"
    assert _parsed(cmd, [])[dest] is None  # default: from the torch build (core/gpu.py)


def test_doctor_still_takes_its_earlier_name() -> None:
    assert _parsed(doctor, ["--hub-device", "rocm"])["hub_device"] == "rocm"


def test_an_unknown_device_type_is_a_usage_error() -> None:
    with pytest.raises(click.UsageError):
        doctor.make_context("doctor", ["--device", "tpu"])
