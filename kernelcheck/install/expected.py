"""install --expect-plan FILE: the hashes a dry run showed travel to the real run. FILE is the JSON of
`install --dry-run -o FILE` (or --json); each wheel step of the real plan whose file the dry run also planned
takes the dry run's sha256 as the one to verify (install/apply.py checks the private copy it installs against it),
so a wheel changed between the review of the dry run and the install is refused: nothing is installed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput
from kernelcheck.install.plan_types import Plan


def read(path: str) -> dict[str, str]:
    """{wheel file name: sha256} of the dry run's plan; BadInput for a file that is not one."""
    try:
        data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise BadInput(f"--expect-plan {path} cannot be read as an install plan ({type(exc).__name__}). Give the "
                       "file `kernelcheck install --dry-run -o FILE` wrote. Nothing was installed.") from None
    steps = data.get("plan") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        raise BadInput(f"--expect-plan {path} has no plan (a list of steps): give the file `kernelcheck install "
                       "--dry-run -o FILE` wrote. Nothing was installed.")
    out = {}
    for s in steps:
        if (isinstance(s, dict) and isinstance(s.get("artifact"), str) and isinstance(s.get("sha256"), str)
                and s["artifact"].endswith(".whl") and s["sha256"]):
            out[Path(s["artifact"]).name] = s["sha256"]
    return out


def pin(plan: Plan, hashes: dict[str, str]) -> Plan:
    """`plan` with each wheel step's expected sha256 the dry run's (the same file name)."""
    steps = tuple(dataclasses.replace(s, sha256=hashes[Path(s.artifact).name])
                  if s.artifact and Path(s.artifact).name in hashes else s for s in plan.steps)
    return dataclasses.replace(plan, steps=steps)


def apply(plan: Plan, path: str | None) -> Plan:
    """`plan` pinned to the dry run in `path` (--expect-plan), or as it is without one."""
    return plan if path is None else pin(plan, read(path))
