"""`verify --step --record FILE`: append the step's measurement as one JSON line, in the fields of
matrix/verified.toml's [[measured]] tables, so a team builds its own table (doctor reads it with
KERNELCHECK_MEASUREMENTS=FILE)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput
from kernelcheck.report.step import PathMeasured, PathProjection, StepSection


def check_path(path: str | None) -> None:
    """Refuse, before anything runs, a record file that cannot be appended to."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"--record {path}: is a folder; name a file (JSON lines are appended to it).")
    if not p.parent.exists() or not p.parent.is_dir():
        raise BadInput(f"--record {path}: the folder {str(p.parent)!r} does not exist; nothing was run.")
    try:
        with p.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise BadInput(f"--record {path}: cannot append to it ({exc.strerror or exc}); nothing was run.") from None


def measurement(step: StepSection, environment: dict[str, Any], model: dict[str, Any], query: str) -> dict[
        str, Any] | None:
    proj = step.projection
    fast, ref = proj.fast, proj.reference
    if not isinstance(fast, PathProjection) or not isinstance(ref, PathProjection) \
            or not fast.projected_tokens_per_s or not ref.projected_tokens_per_s:
        return None
    bound, torch_ref = step.fast, step.reference
    gpus = environment.get("gpus") or [{}]
    versions = environment.get("packages") or {}
    return {
        "date": datetime.date.today().isoformat(), "model_type": model.get("model_type"), "model": model.get("id"),
        "gpu": gpus[0].get("name"), "capability": gpus[0].get("capability"),
        "torch": (environment.get("torch") or {}).get("version"), "triton": environment.get("triton"),
        "transformers": environment.get("transformers"),
        "packages": {k: v.get("version") for k, v in versions.items() if isinstance(v, dict) and v.get("version")},
        "tokens": step.tokens,
        "layers": (len(bound.layers) if isinstance(bound, PathMeasured) else 0) or None,
        "full_layers": sum(fast.full_layers.values()) or None,
        "bound_step_ms": bound.step_ms if isinstance(bound, PathMeasured) else None,
        "reference_step_ms": torch_ref.step_ms if isinstance(torch_ref, PathMeasured) else None,
        "bound_tokens_per_s": fast.projected_tokens_per_s, "reference_tokens_per_s": ref.projected_tokens_per_s,
        "command": f"kernelcheck verify --model {query} --step --tokens {step.tokens}",
        "evidence": "verify --step --record",
    }


def append(report: Any, path: str, query: str) -> bool:
    """Append the report's step measurement to `path`; False when the step measured no projection."""
    step = report.step
    if not isinstance(step, StepSection):
        return False
    m = measurement(step, report.environment or {}, report.model if isinstance(report.model, dict) else {}, query)
    if m is None:
        return False
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(m, sort_keys=True) + "\n")
    return True
