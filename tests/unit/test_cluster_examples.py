"""examples/skypilot-fleet.yaml against SkyPilot's own task schema (tests/data/skypilot: get_task_schema() of
skypilot 0.14.1, with its source), and the gate's place in it: the last command of `setup:`, the first of `run:`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests" / "data" / "skypilot" / "task_schema.json").read_text())
TASK = ROOT / "examples" / "skypilot-fleet.yaml"


def _task() -> dict[str, Any]:
    return dict(yaml.safe_load(TASK.read_text()))


def _commands(script: str) -> list[str]:
    """Shell commands, continuation lines joined, `set -e` and blank lines left out."""
    joined = script.replace("\\\n", " ")
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip() and line.strip() != "set -e"]


def test_the_skypilot_task_is_valid_against_skypilots_task_schema() -> None:
    jsonschema.validate(_task(), SCHEMA)


@pytest.mark.parametrize("bad", [{"setup": ["kernelcheck doctor"]}, {"num_nodes": "4"}, {"gate": "kernelcheck"}])
def test_the_schema_refuses_a_task_that_skypilot_refuses(bad: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(_task() | bad, SCHEMA)


def test_the_gate_ends_setup_and_the_fleet_gate_starts_run() -> None:
    task = _task()
    setup, run = _commands(task["setup"]), _commands(task["run"])
    assert setup[-1] == 'kernelcheck doctor --model "$KCGATE_MODEL" --mode train'
    first = run[0]
    assert "kernelcheck doctor" in first and "--all-ranks" in first and first.endswith("|| exit $?")
    # kernelcheck's rank variables (docs/fleet.md) from SkyPilot's own: one plain process per node, no torchrun
    for var in ("RANK=$SKYPILOT_NODE_RANK", "WORLD_SIZE=$SKYPILOT_NUM_NODES", "MASTER_ADDR=", "MASTER_PORT="):
        assert var in first
    assert run[1].startswith("torchrun ")
