"""The integration half of tests/unit/test_json_schemas.py: processes, pip or builds (the in-process tests
are there).

The JSON contract: every command's real `--json` validates against the schema its id names, one id per"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_json_schemas import (  # helpers and fixtures of the in-process half
    REPO,
    kc,
    validate,
)


@pytest.mark.integration
def test_the_shipped_schema_files_are_the_generator_output() -> None:
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_schemas.py"), "--check"], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout


@pytest.fixture(scope="module")
def doctor_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reports") / "node1.json"
    code, data = kc("doctor", "--model", "qwen3.8-27b", "--json")
    assert code == 3
    out.write_text(json.dumps(data))
    return out


@pytest.mark.integration
def test_every_command_json_validates_against_its_schema(doctor_json: Path, tmp_path: Path) -> None:
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(str(n) for n in range(1, 3000, 3)) + "\n")
    runs = {
        "doctor": ["doctor", "--model", "qwen3.8-27b", "--packing", "flash", "--json"],
        "models": ["models", "--json"],
        "trace": ["trace", str(REPO / "tests/data/gpu/gdn_fallback.json.gz"), "--json"],
        "padding": ["padding", str(lengths), "--plot", str(tmp_path / "p.svg"), "--json"],
        "hub": ["hub", "--model", "qwen3.8-27b", "--json"],
        "install": ["install", "--model", "qwen3.8-27b", "--dry-run", "--json"],
        "fleet": ["compare", str(doctor_json), "--json"],
        "error": ["doctor", "--model", "no-such-model-anywhere", "--json"],
    }
    for kind, args in runs.items():
        code, data = kc(*args)
        assert validate(data) == kind, args
        assert data.get("exit_code", code) == code, args
    assert validate(json.loads(doctor_json.read_text())) == "doctor"


@pytest.mark.integration
def test_verify_json_validates_against_its_schema() -> None:
    code, data = kc("verify", "--model", "qwen3.8-27b", "--json")
    assert validate(data) == "verify" and code == data["exit_code"]
    code, data = kc("verify", "--model", "qwen3.8-27b", "--packing", "--json")
    assert validate(data) == "verify-packing" and code == data["exit_code"]


@pytest.mark.integration
def test_two_identical_doctor_runs_give_the_same_json_but_the_cache_note(doctor_json: Path) -> None:
    first = json.loads(doctor_json.read_text())
    _, second = kc("doctor", "--model", "qwen3.8-27b", "--json")
    assert second["import_proof"]["cache"] == "hit"  # the second run used the proof the first stored
    for d in (first, second):
        d.pop("import_proof")
    assert first == second
