"""One rank's record: the parts of a report that a fleet compares, small enough to gather from thousands.

A full doctor report is ~12 KB of JSON (verify adds per-layer evidence); what decides whether two
ranks run the same kernels is much less: versions, GPUs, which kernel packages import, each
function's status and implementation, the verdict, the findings' ids. `summarise` keeps those (long
reasons cut to a line), `pack` compresses the JSON (zlib), so a rank sends 1-2 KB. `check_report`
validates a report read from a file: the schema it names and the keys a record needs; extra keys are
fine (newer kernelcheck versions add sections).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from kernelcheck import __version__, schemas
from kernelcheck.core.errors import BadInput

REQUIRED = ("command", "verdict", "exit_code", "environment", "functions")
_REASON_CHARS = 160
_ENV_KEYS = ("python", "platform", "triton", "transformers", "kernels", "driver", "nvcc")


def _cut(text: Any) -> Any:
    if isinstance(text, str) and len(text) > _REASON_CHARS:
        return text[: _REASON_CHARS - 3] + "..."
    return text


def _packages(env: dict[str, Any]) -> dict[str, str | None]:
    """{import name: "dist version" | "dist version (import fails)" | None (absent)}."""
    out: dict[str, str | None] = {}
    for name, st in (env.get("packages") or {}).items():
        if not isinstance(st, dict) or not st.get("installed"):
            out[name] = None
            continue
        s = f"{st.get('distribution') or name} {st.get('version') or '?'}"
        out[name] = s if st.get("imports", True) else s + " (import fails)"
    return out


def _dispatch(env: dict[str, Any], findings: list[Any]) -> dict[str, str]:
    """The variables that change which kernel runs (FLA_*, TRANSFORMERS_*, USE_HUB_KERNELS, LOCAL_KERNELS) as
    the report's environment recorded them. A report from before they were recorded there still has doctor's
    dispatch-env finding: then its message stands for them, so two ranks that differ are never "all agree"."""
    from kernelcheck.core.environment import dispatch_variables

    raw = env.get("env")
    got = dispatch_variables({str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {})
    if not got:
        for f in findings:
            if isinstance(f, dict) and f.get("id") == "dispatch-env":
                got = {"dispatch-env": str(_cut(f.get("message")))}
    return got


def _environment(env: dict[str, Any], findings: list[Any] | None = None) -> dict[str, Any]:
    torch = env.get("torch") or {}
    return {
        **{k: env.get(k) for k in _ENV_KEYS},
        "torch": {"version": torch.get("version"), "cuda": torch.get("cuda")} if torch else None,
        "gpus": [{"name": g.get("name"), "capability": g.get("capability")} for g in env.get("gpus") or []],
        "packages": _packages(env),
        "dispatch": _dispatch(env, findings or []),
    }


def summarise(report: dict[str, Any], rank: int | None = None, host: str | None = None) -> dict[str, Any]:
    """The record one rank contributes: a subset of the report schema plus where it ran."""
    if report.get("error") is not None and not report.get("environment"):
        return {"schema": report.get("schema"), "command": report.get("command"), "verdict": None,
                "exit_code": report.get("exit_code", 1), "error": _cut(report["error"]),
                "rank": rank, "host": host, "kernelcheck": report.get("kernelcheck", __version__)}
    model = report.get("model") or {}
    return {
        "schema": report.get("schema"),
        "kernelcheck": report.get("kernelcheck", __version__),
        "command": report.get("command"),
        "verdict": report.get("verdict"),
        "exit_code": report.get("exit_code"),
        "rank": rank,
        "host": host,
        "model": ({"id": model.get("id") or model.get("query"), "model_type": model.get("model_type")}
                  if model else None),
        "mode": report.get("mode"),
        "environment": _environment(report.get("environment") or {}, report.get("findings") or []),
        "functions": [{"name": f.get("name"), "package": f.get("package"), "status": f.get("status"),
                       "implementation": f.get("implementation"), "used": f.get("used", True),
                       "reason": _cut(f.get("reason"))} for f in report.get("functions") or []],
        "findings": [{"id": f.get("id"), "severity": f.get("severity"), "message": _cut(f.get("message"))}
                     for f in report.get("findings") or []],
    }


def pack(record: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(record, separators=(",", ":"), default=str).encode(), 6)


def unpack(blob: bytes) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(zlib.decompress(blob))
    return out


# what compare reads: doctor and verify reports, the error record a stopped run leaves, and 0.1's one id
READS = (schemas.schema_id("doctor"), schemas.schema_id("verify"), schemas.ERROR, schemas.LEGACY)


def check_report(data: Any, source: str) -> dict[str, Any]:
    """A report read from `source`, or BadInput naming the file and what does not match this version."""
    if not isinstance(data, dict):
        raise BadInput(f"{source}: not a kernelcheck report (a JSON object from `kernelcheck doctor --json` or "
                       f"`verify --json` was expected, found {type(data).__name__}).")
    schema = data.get("schema")
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
