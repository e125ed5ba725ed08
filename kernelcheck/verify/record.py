"""`verify --step --record FILE`: append the step's measurement as one JSON line, in the fields of
matrix/verified.toml's [[measured]] tables, so a team builds its own table (doctor reads it with
KERNELCHECK_MEASUREMENTS=FILE)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput


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


def measurement(step: dict[str, Any], environment: dict[str, Any], model: dict[str, Any], query: str) -> dict[
        str, Any] | None:
    proj = step.get("projection") or {}
    paths = step.get("paths") or {}
    fast, ref = proj.get("fast") or {}, proj.get("reference") or {}
    if not fast.get("projected_tokens_per_s") or not ref.get("projected_tokens_per_s"):
        return None
    gpus = environment.get("gpus") or [{}]
    versions = environment.get("packages") or {}
    return {
        "date": datetime.date.today().isoformat(), "model_type": model.get("model_type"), "model": model.get("id"),
        "gpu": gpus[0].get("name"), "capability": gpus[0].get("capability"),
        "torch": (environment.get("torch") or {}).get("version"), "triton": environment.get("triton"),
        "transformers": environment.get("transformers"),
        "packages": {k: v.get("version") for k, v in versions.items() if isinstance(v, dict) and v.get("version")},
        "tokens": step.get("tokens"), "layers": len((paths.get("fast") or {}).get("layers") or []) or None,
        "full_layers": sum((fast.get("full_layers") or {}).values()) or None,
        "bound_step_ms": (paths.get("fast") or {}).get("step_ms"),
        "reference_step_ms": (paths.get("reference") or {}).get("step_ms"),
        "bound_tokens_per_s": fast["projected_tokens_per_s"], "reference_tokens_per_s": ref["projected_tokens_per_s"],
        "command": f"kernelcheck verify --model {query} --step --tokens {step.get('tokens')}",
        "evidence": "verify --step --record",
    }


def append(report: Any, path: str, query: str) -> bool:
    """Append the report's step measurement to `path`; False when the step measured no projection."""
    step = report.step if isinstance(report.step, dict) else None
    if not step:
        return False
    m = measurement(step, report.environment or {}, report.model if isinstance(report.model, dict) else {}, query)
    if m is None:
        return False
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(m, sort_keys=True) + "\n")
    return True
