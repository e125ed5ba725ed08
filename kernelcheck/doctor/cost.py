"""The cost of a FALLBACK in GPU-hours, from a measured training step of the same model family.

Measurements come from the [[measured]] tables of matrix/verified.toml (recorded from `verify --step` runs on real
GPUs, each with its command and evidence) and from a team's own record (KERNELCHECK_MEASUREMENTS=FILE, JSON lines
appended by `verify --step --record FILE`). `choose` and `finding` are pure; `measurements` reads the files."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcheck.core import decide, settings
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Finding, Severity, Status, Verdict
from kernelcheck.report.model import Report

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

BILLION = 1e9
_COMPARED = ("gpu", "torch", "triton", "transformers")
_NUMBERS = ("bound_tokens_per_s", "reference_tokens_per_s")


MAX_RECORD_BYTES = 64 << 20  # a line per measured step; far more than any team's record


def measurements(record: Path | None = None, *, m: Matrix) -> list[dict[str, Any]]:
    """`m`'s verified.toml [[measured]] (checked by core/matrix_shape.py) and the team's record: `record` or
    KERNELCHECK_MEASUREMENTS (a file missing there is `record_unread`'s finding, not an error)."""
    out = [dict(row) for row in m.table("verified.toml").get("measured", [])]
    path = record or recorded_path()
    if path is not None and path.is_file():
        out += read_record(path)
    return out


def recorded_path() -> Path | None:
    return Path(p) if (p := settings.variable("KERNELCHECK_MEASUREMENTS")) else None


def read_record(path: Path) -> list[dict[str, Any]]:
    """The JSON lines `verify --step --record` appends, each checked as a measured step (matrix_shape.MEASURED:
    a model_type, both tokens/s finite and above 0); BadInput naming the file, the line and the key."""
    from kernelcheck.core import matrix_shape

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        raise _bad_record(path, "", f"not readable ({exc.strerror or exc})") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise _bad_record(path, "", f"over {MAX_RECORD_BYTES >> 20} MB, far more than a record of steps holds")
    out = []
    for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line, parse_constant=_no_constant)
        except RecursionError:
            raise _bad_record(path, f"line {n}", "nested too deeply to be a measurement") from None
        except ValueError as exc:
            raise _bad_record(path, f"line {n}", f"not a JSON object ({exc})") from None
        if (problem := matrix_shape.problem(item, matrix_shape.MEASURED)) is not None:
            raise _bad_record(path, f"line {n}" + (f": {problem[0]}" if problem[0] else ""), problem[1])
        out.append(item | {"recorded_in": str(path)})
    return out


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a measurement")


def _bad_record(path: Path, where: str, what: str) -> BadInput:
    at = f"{path}: {where}" if where else str(path)
    return BadInput(f"KERNELCHECK_MEASUREMENTS {at}: {what}. Each line is one JSON object as `kernelcheck verify "
                    "--step --record FILE` writes it (model_type, bound_tokens_per_s and reference_tokens_per_s "
                    "above 0); delete or fix that line, or unset KERNELCHECK_MEASUREMENTS.")


def record_unread() -> Finding | None:
    """KERNELCHECK_MEASUREMENTS names no file (missing, or a folder): said, never skipped in silence."""
    path = recorded_path()
    if path is None or path.is_file():
        return None
    what = "is a folder" if path.is_dir() else "does not exist"
    return Finding("measurements-unread", Severity.WARNING,
                   f"KERNELCHECK_MEASUREMENTS={path} {what}, so the team's measured steps were not read; a "
                   "fallback's cost comes from the shipped measurements only.",
                   "point KERNELCHECK_MEASUREMENTS at the file `kernelcheck verify --step --record FILE` writes")


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


def finding(m: Mapping[str, Any] | None, distance: Sequence[str], model: str, torch_path: Sequence[str] = (),
            kernels_run: Sequence[str] = ()) -> Finding:
    """The cost finding. `torch_path`: the job's functions that take the torch path (the finding names them);
    `kernels_run`: the measured packages whose kernels still run in this job (the measurement then prices more
    torch than the job has: an upper bound)."""
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
    runs = "still runs its" if len(kernels_run) == 1 else "still run their"
    part = (f" That step runs every kernel on the torch path; in this job {', '.join(kernels_run)} {runs} kernels "
            f"and only {', '.join(torch_path)} take the torch path, so the cost is at most this."
            if kernels_run else "")
    return Finding("fallback-cost", Severity.WARNING,
                   f"Expected cost of this fallback: the torch path trains about {slowdown:.1f}x slower "
                   f"({ref:,.0f} vs {bound:,.0f} tokens/s per GPU for the full model), about {extra:,.0f} extra "
                   f"GPU-hours per billion training tokens. Measured by `{m.get('command')}` on {where} "
                   f"({m.get('recorded_in') or m.get('evidence')}){near}.{part}", functions=tuple(torch_path))


def attach(report: Report, model: str | None, *, m: Matrix) -> None:
    """Add the cost finding to a FALLBACK report of a known model where some function the job uses takes the torch
    path (its provider, decided for the verdict's device: doctor/provider.py); nothing for other verdicts, nor
    for a fallback whose functions run their package (a CUDA prediction whose GPU is not named)."""
    if (unread := record_unread()) is not None:
        report.findings.append(unread)
    if not model or report.verdict != Verdict.FALLBACK:
        return
    torch_path = [fs.name for fs in report.functions if fs.used and fs.status != Status.FAST
                  and fs.provider == decide.TORCH.provider and not fs.name.startswith("attention:")]
    if not torch_path:
        return
    env = report.environment
    here = {"gpu": env.gpus[0].name if env and env.gpus else None,
            "torch": env.torch.version if env and env.torch else None, "triton": env.triton if env else None,
            "transformers": env.transformers if env else None}
    best, distance = choose(measurements(m=m), report.model.model_type if report.model else None, here)
    measured = set(best.get("packages") or ()) if best is not None else set()
    kernels_run = sorted({fs.package for fs in report.functions if fs.used and fs.package in measured
                          and fs.name not in torch_path})
    report.findings.append(finding(best, distance, model, torch_path, kernels_run))
