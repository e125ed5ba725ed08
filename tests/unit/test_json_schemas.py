"""The JSON contract: every command's real `--json` validates against the schema its id names, one id per
report kind, and two identical runs give the same JSON except the run-to-run state (`import_proof`).

jsonschema (test extra) validates; the schema files are kernelcheck/schemas/*.schema.json, written by
scripts/gen_schemas.py. The fast tests check the files and in-process reports; the `integration` ones run
each command as a user does (a process, its stdout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kernelcheck import schemas
from kernelcheck.core.status import Finding, FunctionStatus
from kernelcheck.report.model import Report
from tests.environments import make_view, model_ref

REPO = Path(__file__).resolve().parents[2]


def validate(data: dict[str, Any]) -> str:
    """Validate `data` against the schema its `schema` id names; returns the kind."""
    kind = schemas.kind_of(data.get("schema"))
    assert kind is not None, f"unknown schema id {data.get('schema')!r}"
    jsonschema.Draft202012Validator(schemas.load(kind)).validate(data)
    return kind


def test_the_shipped_schema_files_are_valid_json_schema() -> None:
    for kind in schemas.KINDS:
        doc = schemas.load(kind)
        jsonschema.Draft202012Validator.check_schema(doc)
        assert doc["$id"] == schemas.schema_id(kind)
    assert len({schemas.schema_id(k) for k in schemas.KINDS}) == len(schemas.KINDS)


def test_the_schema_files_ship_in_the_package() -> None:
    import tomllib

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "kernelcheck.schemas" in setuptools["packages"]
    assert setuptools["package-data"]["kernelcheck.schemas"] == ["*.json"]


def _report(command: str) -> Report:
    env = make_view(None, python="3.11.7", python_tag="cp311", torch="2.13.0", cuda=None, triton=None,
                    transformers="5.24.0", nvcc=None)
    r = Report(command, env, model_ref(), "train",
               [FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fallback", "torch", "not installed", "pip x")],
               [Finding("torch-cpu-build", "info", "a CPU build")])
    return r


def test_each_report_kind_carries_its_own_id_and_a_wrong_shape_fails() -> None:
    doctor = _report("doctor").to_json()
    assert doctor["schema"] == "kernelcheck.doctor/1" and validate(doctor) == "doctor"
    assert _report("verify").to_json()["schema"] == "kernelcheck.verify/1"
    broken = dict(doctor, findings=[{"id": "x", "severity": "loud", "message": "m", "fix": None, "reference": None,
                                     "functions": []}])
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)
    with pytest.raises(jsonschema.ValidationError):  # a doctor report is not a padding report
        jsonschema.Draft202012Validator(schemas.load("padding")).validate(doctor)


def test_a_cache_hit_is_a_note_not_a_finding() -> None:
    from kernelcheck.report.model import ImportProof
    from kernelcheck.report.text import render_text

    r = _report("doctor")
    r.import_proof = ImportProof("cache", "hit", "/c/proof.json", "2026-12-03T18:00:00Z")
    data = r.to_json()
    assert [f["id"] for f in data["findings"]] == ["torch-cpu-build"] and data["import_proof"]["cache"] == "hit"
    assert any(ln.startswith("cache: ") \
        and "2026-12-03T18:00:00Z" in ln for ln in render_text(r).splitlines())  # wording: renderer test


# --- every command, run as a user runs it ---------------------------------------------------------------------

def kc(*args: str, cwd: Path = REPO) -> tuple[int, dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    res = subprocess.run([sys.executable, "-m", "kernelcheck", *args], capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=600)
    try:
        return res.returncode, json.loads(res.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not JSON (exit {res.returncode}): {res.stdout[-2000:]} {res.stderr[-2000:]}") from None
