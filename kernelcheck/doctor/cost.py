"""The cost of a FALLBACK in GPU-hours, from a measured training step of the same model family.

Measurements come from the [[measured]] tables of matrix/verified.toml (recorded from `verify --step` runs on real
GPUs, each with its command and evidence) and from a team's own record (KERNELCHECK_MEASUREMENTS=FILE, JSON lines
appended by `verify --step --record FILE`). `choose` and `finding` are pure; `measurements` reads the files."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelcheck.core import settings
from kernelcheck.core.status import Finding, Severity, Verdict
from kernelcheck.report.model import Report

BILLION = 1e9
_COMPARED = ("gpu", "torch", "triton", "transformers")
_NUMBERS = ("bound_tokens_per_s", "reference_tokens_per_s")


def measurements(record: Path | None = None) -> list[dict[str, Any]]:
    from kernelcheck.core import matrix

    out = [dict(m) for m in matrix.table("verified.toml").get("measured", [])]
    path = record or (Path(p) if (p := settings.variable("KERNELCHECK_MEASUREMENTS")) else None)
    if path is not None and path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict) and all(isinstance(item.get(k), int | float) for k in _NUMBERS):
                out.append(item | {"recorded_in": str(path)})
    return out


def _distance(m: Mapping[str, Any], here: Mapping[str, str | None]) -> list[str]:
    return [f"{k} {m.get(k)} there, {here.get(k) or 'none'} here" for k in _COMPARED
            if here.get(k) is not None and str(m.get(k)) != str(here.get(k))]


def choose(ms: Sequence[Mapping[str, Any]], model_type: str | None,
           here: Mapping[str, str | None]) -> tuple[Mapping[str, Any] | None, list[str]]:
    """The measurement of the same model_type closest to this environment (fewest differing versions;
    newest on a tie), and how it differs."""
    same = [m for m in ms if model_type and m.get("model_type") == model_type
            and all(isinstance(m.get(k), int | float) for k in _NUMBERS)]  # a packing payoff row is not a step
    if not same:
        return None, []
    best = sorted(same, key=lambda m: (len(_distance(m, here)), [-ord(c) for c in str(m.get("date", ""))]))[0]
    return best, _distance(best, here)


def finding(m: Mapping[str, Any] | None, distance: Sequence[str], model: str) -> Finding:
    if m is None:
        return Finding("fallback-cost-unmeasured", Severity.INFO,
                       "No measured training step exists for this model family, so the cost of the fallback "
                       "is not known. Measure one on the job's GPU (both paths side by side) and record it.",
                       f"kernelcheck verify --model {model} --step --record measurements.jsonl   "
                       "(then KERNELCHECK_MEASUREMENTS=measurements.jsonl)")
    bound, ref = float(m["bound_tokens_per_s"]), float(m["reference_tokens_per_s"])
    slowdown = bound / ref
    extra = BILLION / ref / 3600 - BILLION / bound / 3600
    where = f"{m.get('gpu')}, torch {m.get('torch')}, transformers {m.get('transformers')}, {m.get('date')}"
    near = "; it differs from here in " + ", ".join(distance) if distance else "; same GPU and versions as here"
    return Finding("fallback-cost", Severity.WARNING,
                   f"Expected cost of this fallback: the torch path trains about {slowdown:.1f}x slower "
                   f"({ref:,.0f} vs {bound:,.0f} tokens/s per GPU for the full model), about {extra:,.0f} extra "
                   f"GPU-hours per billion training tokens. Measured by `{m.get('command')}` on {where} "
                   f"({m.get('recorded_in') or m.get('evidence')}){near}.")


def attach(report: Report, model: str | None) -> None:
    """Add the cost finding to a FALLBACK report of a known model (nothing for other verdicts)."""
    if not model or report.verdict != Verdict.FALLBACK:
        return
    env = report.environment
    here = {"gpu": env.gpus[0].name if env and env.gpus else None,
            "torch": env.torch.version if env and env.torch else None, "triton": env.triton if env else None,
            "transformers": env.transformers if env else None}
    m, distance = choose(measurements(), report.model.model_type if report.model else None, here)
    report.findings.append(finding(m, distance, model))
