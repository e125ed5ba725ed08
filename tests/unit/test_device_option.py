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


def test_the_aliases_are_named_not_inferred_from_the_destination() -> None:
    from kernelcheck.cli.common import device_option

    @click.command()
    @device_option("hub_device")  # the destination alone adds no alias
    def plain(hub_device: str | None) -> None: ...

    @click.command()
    @device_option("device", aliases=("--hub-device",))
    def aliased(device: str | None) -> None: ...

    assert [p.opts for p in plain.params] == [["--device"]]
    assert [p.opts for p in aliased.params] == [["--device", "--hub-device"]]
    assert _parsed(aliased, ["--hub-device", "cpu"])["device"] == "cpu"
    assert [p.opts for p in hub.params if p.name == "device"] == [["--device"]]
    assert [p.opts for p in doctor.params if p.name == "hub_device"] == [["--device", "--hub-device"]]
