"""Planning for another build (install --torch/--cuda/--python): the target's torch and triton are held as
installed (metadata only) for pip's resolution of a fix, so a fix is not refused because this machine's index
lacks the target's torch. In-process: the constraints text in, the held folder out."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from kernelcheck.install import sources


def test_pins_this_environment_has_are_not_planned_and_the_targets_are() -> None:
    here = metadata.version("torch")
    text = f"# pins\ntorch=={here}\ntransformers=={metadata.version('transformers')}\ntriton==3.6.0\n"
    assert sources.planned_pins(text) == {"triton": "3.6.0"}  # no triton on this CPU box
    assert sources.planned_pins("torch==2.11.0+cu130\n") == {"torch": "2.11.0+cu130"}
    assert sources.planned_pins(f"torch=={here}\n") == {}


def test_the_held_view_holds_the_target_build_and_not_this_machines_torch(tmp_path: Path) -> None:
    unmet = {"torch": ("torch", "2.13.0", ["filelock"], ["sympy>=1"])}
    folder = sources._held_view(tmp_path / "held", unmet, {"torch": "2.11.0+cu130", "triton": "3.6.0"})
    got = {d.metadata["Name"]: d.version for d in metadata.distributions(path=[str(folder)])}
    assert got == {"torch": "2.11.0+cu130", "triton": "3.6.0"}
    torch = next(d for d in metadata.distributions(path=[str(folder)]) if d.metadata["Name"] == "torch")
    assert not torch.requires  # held as installed: nothing for pip to resolve below it
