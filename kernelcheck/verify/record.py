"""`verify --step --record FILE`: append the step's measurement as one JSON line, in the fields of
matrix/verified.toml's [[measured]] tables, so a team builds its own table (doctor reads it with
KERNELCHECK_MEASUREMENTS=FILE)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from kernelcheck.core import paths
from kernelcheck.core.errors import BadInput
from kernelcheck.report.model import Report
from kernelcheck.report.sections import EnvironmentView, ModelRef
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
    with paths.open_checked(p, "a", "--record", "Name a file kernelcheck can append to; nothing was run.",
                            encoding="utf-8"):
        pass


def measurement(step: StepSection, environment: EnvironmentView | None, model: ModelRef | None,
                query: str) -> dict[str, Any] | None:
    proj = step.projection
    fast, ref = proj.fast, proj.reference
    if not isinstance(fast, PathProjection) or not isinstance(ref, PathProjection) \
            or not fast.projected_tokens_per_s or not ref.projected_tokens_per_s:
        return None
    bound, torch_ref = step.fast, step.reference
    gpu = environment.gpus[0] if environment and environment.gpus else None
    torch = environment.torch if environment else None
    versions = environment.packages if environment else {}
    return {
        "date": datetime.date.today().isoformat(), "model_type": model.model_type if model else None,
        "model": model.id if model else None,
        "gpu": gpu.name if gpu else None, "capability": gpu.capability.dotted if gpu else None,
        "torch": torch.version if torch else None, "triton": environment.triton if environment else None,
        "transformers": environment.transformers if environment else None,
        "packages": {k: v.version for k, v in versions.items() if v.version},
        "tokens": step.tokens,
        "layers": (len(bound.layers) if isinstance(bound, PathMeasured) else 0) or None,
        "full_layers": sum(fast.full_layers.values()) or None,
        "bound_step_ms": bound.step_ms if isinstance(bound, PathMeasured) else None,
        "reference_step_ms": torch_ref.step_ms if isinstance(torch_ref, PathMeasured) else None,
        "bound_tokens_per_s": fast.projected_tokens_per_s, "reference_tokens_per_s": ref.projected_tokens_per_s,
        "command": f"kernelcheck verify --model {query} --step --tokens {step.tokens}",
        "evidence": "verify --step --record",
    }


def append(report: Report, path: str, query: str) -> bool:
    """Append the report's step measurement to `path`; False when the step measured no projection."""
    step = report.step
    if not isinstance(step, StepSection):
        return False
    m = measurement(step, report.environment, report.model, query)
    if m is None:
        return False
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(m, sort_keys=True) + "\n")
    return True
