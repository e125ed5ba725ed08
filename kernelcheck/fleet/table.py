"""The fleet table, the differences that matter, and the fleet's exit code.

Ranks are grouped by a fingerprint: the fields that decide which kernels run (versions, GPUs, kernel
packages, each function's status and implementation, the verdict). The largest group is the
reference; every other group is named with its ranks and hosts and the fields where it differs.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kernelcheck import __version__
from kernelcheck.core.capability import sm_name
from kernelcheck.core.status import (
    EXIT_BROKEN,
    EXIT_FALLBACK,
    EXIT_INTERNAL,
    EXIT_READY,
    EXIT_USAGE,
    Status,
    verdict_of_exit,
    worst_exit,
)

ROWS_PER_RANK_UP_TO = 64
FLEET_SCHEMA = "kernelcheck.fleet/1"


def fleet_code(records: list[dict[str, Any]], missing: dict[int, str]) -> int:
    """The code every rank exits with: the worst rank's, and broken when a rank is missing or nothing reported."""
    if missing or not records:
        return EXIT_BROKEN
    return worst_exit(int(r.get("exit_code", 1)) for r in records)


def _gpu(env: dict[str, Any]) -> str:
    gpus = env.get("gpus") or []
    if not gpus:
        return "none"
    names: dict[str, int] = {}
    for g in gpus:
        key = f"{g.get('name')} {sm_name(g.get('capability') or '?')}"
        names[key] = names.get(key, 0) + 1
    return ", ".join(f"{n}x {k}" if n > 1 else k for k, n in names.items())


def _torch(env: dict[str, Any]) -> str:
    t = env.get("torch") or {}
    if not t:
        return "absent"
    return f"{t.get('version')}" + (f" cu{t['cuda']}" if t.get("cuda") else "")


def _packages(env: dict[str, Any]) -> str:
    got = [v for v in (env.get("packages") or {}).values() if v]
    return ", ".join(got) if got else "none"


def _dispatch(env: dict[str, Any]) -> str:
    got = env.get("dispatch") or {}
    if not isinstance(got, dict) or not got:
        return "none"
    return ", ".join(v if k == "dispatch-env" else f"{k}={v}" for k, v in got.items())


def fingerprint(rec: dict[str, Any]) -> OrderedDict[str, str]:
    """The fields compared across ranks, in the order differences are told."""
    fp: OrderedDict[str, str] = OrderedDict()
    if rec.get("error") is not None and rec.get("verdict") is None:
        fp["error"] = str(rec["error"])
        fp["verdict"] = f"error (exit {rec.get('exit_code')})"
        return fp
    env = rec.get("environment") or {}
    fp["kernelcheck"] = str(rec.get("kernelcheck") or "?")
    fp["GPU"] = _gpu(env)
    fp["driver"] = str(env.get("driver") or "none")
    fp["python"] = str(env.get("python"))
    fp["torch"] = _torch(env)
    for k in ("triton", "transformers", "kernels"):
        fp[k] = str(env.get(k) or "absent")
    fp["kernel packages"] = _packages(env)
    fp["dispatch variables"] = _dispatch(env)
    fp["model"] = str((rec.get("model") or {}).get("id"))
    fp["mode"] = str(rec.get("mode"))
    for f in rec.get("functions") or []:
        fp[f"{f['name']}"] = f"{f.get('status')} ({f.get('implementation')})"
    fp["verdict"] = str(rec.get("verdict"))
    return fp


def groups(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Ranks with identical fingerprints, largest group first (ties: lowest rank first)."""
    by: dict[tuple[tuple[str, str], ...], list[dict[str, Any]]] = {}
    for rec in records:
        by.setdefault(tuple(fingerprint(rec).items()), []).append(rec)
    return sorted(by.values(), key=lambda g: (-len(g), _label_key(g[0])))


def _label_key(rec: dict[str, Any]) -> tuple[int, str]:
    r = rec.get("rank")
    return (r if isinstance(r, int) else 1 << 30, str(rec.get("label") or ""))


def label(rec: dict[str, Any]) -> str:
    """`rank 2 (node03)` for gathered records, the file's name for compared ones."""
    if rec.get("rank") is not None:
        return f"rank {rec['rank']}" + (f" ({rec['host']})" if rec.get("host") else "")
    return str(rec.get("label") or rec.get("host") or "?")


def _span(recs: list[dict[str, Any]], limit: int = 12) -> str:
    names = [label(r) for r in recs]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def differences(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per group that is not the largest: who, and each field where it differs from the largest."""
    gs = groups(records)
    if len(gs) < 2:
        return []
    ref = fingerprint(gs[0][0])
    out = []
    for g in gs[1:]:
        fp = fingerprint(g[0])
        fields = [{"field": k, "value": fp.get(k, "absent"), "others": ref.get(k, "absent")}
                  for k in OrderedDict.fromkeys([*ref, *fp]) if fp.get(k) != ref.get(k)]
        out.append({"ranks": [label(r) for r in g], "fields": fields})
    return out


def _row(rec: dict[str, Any], functions: list[str]) -> list[str]:
    fp = fingerprint(rec)
    if "error" in fp:
        return [label(rec), "-", "-", "-", "-", "-", "-", *(["-"] * len(functions)), f"error: {fp['error'][:60]}"]
    statuses = {f["name"]: f.get("status", "?") for f in rec.get("functions") or []}
    marks = [s if s == Status.FAST else s.upper() for s in (statuses.get(n, "-") for n in functions)]
    return [label(rec), fp["GPU"], fp["driver"], fp["torch"], fp["triton"], fp["transformers"],
            fp["kernel packages"], *marks, str(rec.get("verdict")).upper()]


def _function_names(records: list[dict[str, Any]]) -> list[str]:
    names: OrderedDict[str, None] = OrderedDict()
    for rec in records:
        for f in rec.get("functions") or []:
            names[f["name"]] = None
    return list(names)


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def table_lines(records: list[dict[str, Any]], missing: dict[int, str]) -> list[str]:
    functions = _function_names(records)
    head = ["rank", "GPU", "driver", "torch", "triton", "transformers", "kernel packages",
            *[f"F{i + 1}" for i in range(len(functions))], "verdict"]
    rows = [head]
    if len(records) <= ROWS_PER_RANK_UP_TO:
        rows += [_row(r, functions) for r in sorted(records, key=_label_key)]
    else:  # one row per group: thousands of identical rows say nothing
        for g in groups(records):
            row = _row(g[0], functions)
            row[0] = f"{len(g)} ranks: {_span(g, 4)}"
            rows.append(row)
    rows += [[f"rank {r}", *(["-"] * (len(head) - 2)), f"MISSING: {why}"] for r, why in sorted(missing.items())]
    out = _grid(rows)
    out += [f"  F{i + 1} = {n}" for i, n in enumerate(functions)]
    return out


def render_text(command: str, records: list[dict[str, Any]], missing: dict[int, str], code: int,
                message: str | None = None) -> str:
    total = len(records) + len(missing)
    out = [f"kernelcheck {command} --all-ranks · {total} ranks" if command != "compare"
           else f"kernelcheck compare · {total} reports"]
    out.append("fleet")
    out += table_lines(records, missing)
    out.append("differences")
    diffs = differences(records)
    if not diffs and not missing:
        out.append(f"  none: all {len(records)} agree")
    else:
        gs = groups(records)
        if gs and diffs:
            out.append(f"  {len(gs[0])} agree: {_span(gs[0])}")
        for d in diffs:
            out.append(f"  ODD {', '.join(d['ranks'][:12])}" + (" ..." if len(d["ranks"]) > 12 else "") + ":")
            out += [f"      {f['field']}: {f['value']}   (others: {f['others']})" for f in d["fields"]]
        for r, why in sorted(missing.items()):
            out.append(f"  MISSING rank {r}: {why}")
    if message:
        out.append(f"fleet: {message}")
    words = {EXIT_READY: "READY: every rank will run the fast kernels",
             EXIT_FALLBACK: "FALLBACK: a rank would run a slow torch path",
             EXIT_BROKEN: "BROKEN: a rank would crash, refuse or compute wrong results, or a rank is missing",
             EXIT_USAGE: "a rank could not be checked (bad input)",
             EXIT_INTERNAL: "a rank's check failed (internal error)"}
    out.append(f"verdict: {words.get(code, 'unknown')} (exit {code})")
    return "\n".join(out)


def _verdict(code: int) -> str | None:
    """The fleet's verdict word, or None when the worst rank ended with an error (exit 1 or 2)."""
    try:
        return verdict_of_exit(code).value
    except ValueError:
        return None


def to_json(command: str, records: list[dict[str, Any]], missing: dict[int, str], code: int,
            message: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    gs = groups(records)
    return {
        "schema": FLEET_SCHEMA, "command": command, "kernelcheck": __version__,
        "verdict": _verdict(code), "exit_code": code,
        "size": len(records) + len(missing), "message": message,
        "groups": [[label(r) for r in g] for g in gs],
        "differences": differences(records),
        "missing": [{"rank": r, "reason": why} for r, why in sorted(missing.items())],
        "ranks": sorted(records, key=_label_key),
        **(extra or {}),
    }
