"""The report's `budget` section (trace --budget, verify --step --budget): one step budget per path (budget/build.py
makes each; "trace" for a trace file, "fast" and "reference" for verify --step), under its own schema id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelcheck import schemas

SCHEMA = schemas.schema_id("budget")


@dataclass(frozen=True)
class BudgetSection:
    paths: dict[str, dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "paths": {k: {kk: vv for kk, vv in v.items() if kk != "schema"}
                                            for k, v in self.paths.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BudgetSection:
        return cls(dict(data["paths"]))
