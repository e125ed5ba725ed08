"""The JSON contract: one schema id per report kind, and the JSON Schema file that describes each.

Every `--json` object starts with `schema`, a kind and a version: `kernelcheck.doctor/1`, `kernelcheck.verify/1`,
`kernelcheck.install/1`, `kernelcheck.hub/1`, `kernelcheck.trace/1`, `kernelcheck.padding/1`,
`kernelcheck.models/1`, `kernelcheck.verify-packing/1`, `kernelcheck.fleet/1` (compare, --all-ranks),
`kernelcheck.forecast/1` (doctor --upgrade: the doctor reports before and after, and their diff),
`kernelcheck.warm/1` (the cache folder warm compiled, its manifest and env lines),
`kernelcheck.hub-bundle/1` (hub --bundle / --verify-bundle: an air-gapped bundle's entries and checks),
`kernelcheck.budget/1` (the `budget` object that trace --budget and verify --step --budget add to their report) and
`kernelcheck.error/1` (any command that stopped before its report: `verdict` null, `error` the message).
The version grows when a field is removed or changes meaning; new fields keep it. The files beside this module
(`<kind>.schema.json`, JSON Schema draft 2020-12, self-contained) are what
tests/integration/test_json_schemas.py validates every command's output against; scripts/gen_schemas.py writes
them (edit it, not the files).

`kernelcheck.report/1` was the one id of 0.1 for doctor, verify, install, hub and trace alike; `compare` still
reads doctor and verify reports that carry it.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

KINDS = ("doctor", "verify", "install", "hub", "trace", "padding", "models", "verify-packing", "fleet", "forecast",
         "warm", "hub-bundle", "error", "budget")
LEGACY = "kernelcheck.report/1"


def schema_id(kind: str) -> str:
    """`kernelcheck.<kind>/1` for a kind in KINDS (a Report's command is its kind)."""
    if kind not in KINDS:
        raise ValueError(f"no JSON schema for report kind {kind!r}")
    return f"kernelcheck.{kind}/1"


ERROR = schema_id("error")


def kind_of(schema: object) -> str | None:
    """The kind a schema id names (None for an id of another program or version)."""
    if not isinstance(schema, str) or not schema.startswith("kernelcheck.") or not schema.endswith("/1"):
        return None
    kind = schema[len("kernelcheck."):-2]
    return kind if kind in KINDS else None


def load(kind: str) -> dict[str, Any]:
    """The JSON Schema of a kind, from the installed package."""
    text = resources.files(__name__).joinpath(f"{kind}.schema.json").read_text(encoding="utf-8")
    out: dict[str, Any] = json.loads(text)
    return out
