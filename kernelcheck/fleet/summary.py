"""One rank's record: the parts of a report that a fleet compares, small enough to gather from thousands.

A full doctor report is ~12 KB of JSON (verify adds per-layer evidence); what decides whether two
ranks run the same kernels is much less: versions, GPUs, which kernel packages import, each
function's status and implementation, the verdict, the findings' ids. `summarise` reads those once from
the report's JSON into a typed record (record.RankRecord; long reasons cut to a line), `pack` compresses the
record's JSON (zlib), so a rank sends 1-2 KB, and `unpack` reads a gathered one back typed. `check_report`
validates a report read from a file: the schema it names and the keys a record needs; extra keys are
fine (newer kernelcheck versions add sections).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from kernelcheck import schemas
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Status, Verdict
from kernelcheck.core.version import __version__
from kernelcheck.fleet import record

DISPATCH_ENV = "dispatch-env"  # doctor's finding that named the dispatch variables before the environment held them

REQUIRED = ("command", "verdict", "exit_code", "environment", "functions")
_REASON_CHARS = 160


def _cut(value: Any) -> str | None:
    text = record.text(value)
    if text is not None and len(text) > _REASON_CHARS:
        return text[: _REASON_CHARS - 3] + "..."
    return text


def _packages(env: Mapping[str, Any]) -> dict[str, str | None]:
    """{import name: "dist version" | "dist version (import fails)" | None (absent)}."""
    out: dict[str, str | None] = {}
    for name, st in (env.get("packages") or {}).items():
        if not isinstance(st, dict) or not st.get("installed"):
            out[name] = None
            continue
        s = f"{st.get('distribution') or name} {st.get('version') or '?'}"
        out[name] = s if st.get("imports", True) else s + " (import fails)"
    return out


def _dispatch(env: Mapping[str, Any], findings: list[Any]) -> dict[str, str]:
    """The variables that change which kernel runs (FLA_*, TRANSFORMERS_*, USE_HUB_KERNELS, LOCAL_KERNELS) as
    the report's environment recorded them. A report from before they were recorded there still has doctor's
    dispatch-env finding: then its message stands for them, so two ranks that differ are never "all agree"."""
    from kernelcheck.core.environment import dispatch_variables

    raw = env.get("env")
    got = dispatch_variables({str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {})
    if not got:
        for f in findings:
            if isinstance(f, dict) and f.get("id") == DISPATCH_ENV:
                got = {DISPATCH_ENV: str(_cut(f.get("message")))}
    return got


def _environment(env: Mapping[str, Any], findings: list[Any]) -> record.RecordEnvironment:
    torch = env.get("torch") or {}
    return record.RecordEnvironment(
        {k: record.text(env.get(k)) for k in record.ENV_KEYS},
        record.TorchBrief(record.text(torch.get("version")), record.text(torch.get("cuda"))) if torch else None,
        tuple(record.GpuBrief(record.text(g.get("name")), record.text(g.get("capability")))
              for g in env.get("gpus") or []),
        _packages(env), _dispatch(env, findings))


def summarise(report: Mapping[str, Any], rank: int | None = None, host: str | None = None,
              label: str | None = None) -> record.RankRecord:
    """The record one rank contributes, read once from its report's JSON (compare's files are checked first:
    report_check): a subset of the report schema plus where it ran, as typed values."""
    head: dict[str, Any] = {"schema": record.text(report.get("schema")), "command": record.text(report.get("command")),
            "kernelcheck": record.text(report.get("kernelcheck")) or __version__, "rank": rank, "host": host,
            "label": label}
    if report.get("error") is not None and not report.get("environment"):
        return record.RankRecord(exit_code=report.get("exit_code", 1), error=_cut(report["error"]), **head)
    model, verdict = report.get("model") or {}, report.get("verdict")
    findings = report.get("findings") or []
    return record.RankRecord(
        exit_code=report["exit_code"], verdict=Verdict(verdict) if verdict is not None else None, **head,
        model=record.RecordModel(model.get("id") or model.get("query"), model.get("model_type")) if model else None,
        mode=report.get("mode"), environment=_environment(report.get("environment") or {}, findings),
        functions=tuple(record.RecordFunction(f.get("name"), f.get("package"), Status(f.get("status")),
                                              f.get("implementation"), f.get("used", True), _cut(f.get("reason")))
                        for f in report.get("functions") or []),
        findings=tuple(record.RecordFinding(f.get("id"), f.get("severity"), _cut(f.get("message")))
                       for f in findings))


def pack(rec: record.RankRecord) -> bytes:
    return zlib.compress(json.dumps(rec.to_json(), separators=(",", ":"), default=str).encode(), 6)


def unpack(blob: bytes) -> record.RankRecord:
    """A gathered blob read back, once, where it arrives: ValueError when it is not a record this kernelcheck
    reads."""
    try:
        data = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError, TypeError) as exc:
        raise ValueError(f"not a packed record ({exc})") from None
    return record.RankRecord.from_json(data)


# what compare reads: doctor and verify reports, the error record a stopped run leaves, and 0.1's one id
READS = (schemas.schema_id("doctor"), schemas.schema_id("verify"), schemas.ERROR, schemas.LEGACY)


def check_report(data: Any, source: str) -> dict[str, Any]:
    """A report read from `source`, or BadInput naming the file and what does not match this version."""
    if not isinstance(data, dict):
        raise BadInput(f"{source}: not a kernelcheck report (a JSON object from `kernelcheck doctor --json` or "
                       f"`verify --json` was expected, found {type(data).__name__}).")
    schema = data.get("schema")
    if not (isinstance(schema, str) and schema.startswith("kernelcheck.")):
        raise BadInput(f"{source}: not a kernelcheck report: a JSON object without a kernelcheck \"schema\" key "
                       f"({'no schema key' if schema is None else f'schema {schema!r}'}). compare reads the files "
                       "`kernelcheck doctor --json` and `verify --json` (or -o FILE) write.")
    if schema not in READS:
        raise BadInput(f"{source}: report schema {schema!r}, but this kernelcheck ({__version__}) reads "
                       f"{', '.join(READS)}. "
                       "The reports come from a different kernelcheck version: rerun the check on every node with "
                       "one kernelcheck version (pin it in the image) and compare again.")
    if data.get("error") is not None and data.get("verdict") is None:
        return data  # a run that stopped before its report: compare shows the error for that node
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise BadInput(f"{source}: schema {schema} report without {', '.join(missing)}: the file is truncated or was "
                       "not written by `kernelcheck doctor/verify --json` (pass reports, not logs).")
    if data["command"] not in ("doctor", "verify"):
        raise BadInput(f"{source}: a `kernelcheck {data['command']}` report; compare reads doctor and verify reports.")
    return data
