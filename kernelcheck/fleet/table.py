"""The fleet table, the differences that matter, and the fleet's exit code.

Ranks are grouped by a fingerprint: the fields that decide which kernels run (versions, GPUs, kernel
packages, each function's status and implementation, the verdict). The largest group is the
reference; every other group is named with its ranks and hosts and the fields where it differs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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
from kernelcheck.core.version import __version__
from kernelcheck.fleet.gather import DIED, NEVER_JOINED, NO_REPORT, UNREADABLE, Missing
from kernelcheck.fleet.record import GpuBrief, RankRecord, RecordEnvironment
from kernelcheck.fleet.summary import DISPATCH_ENV
from kernelcheck.report.text import STATUS_WORDS
from kernelcheck.report.wrap import clip

ROWS_PER_RANK_UP_TO = 64
FLEET_SCHEMA = "kernelcheck.fleet/1"


def fleet_code(records: Iterable[RankRecord], missing: dict[int, Missing]) -> int:
    """The code every rank exits with: the worst rank's, and broken when a rank is missing or nothing reported."""
    codes = [r.exit_code for r in records]
    if missing or not codes:
        return EXIT_BROKEN
    return worst_exit(codes)


# why a rank is missing, in words: the JSON's missing[].reason and the table's MISSING lines
_MISSING_WORDS = {NEVER_JOINED: "never joined", DIED: "died during the gather",
                  UNREADABLE: "sent a record this kernelcheck cannot read",
                  NO_REPORT: "no report (expected {expected}, found {found})"}


def missing_reason(m: Missing) -> str:
    return _MISSING_WORDS[m.kind].format(expected=m.expected, found=m.found)


def _gpu(gpus: tuple[GpuBrief, ...]) -> str:
    if not gpus:
        return "none"
    names: dict[str, int] = {}
    for g in gpus:
        key = f"{g.name} {sm_name(g.capability or '?')}"
        names[key] = names.get(key, 0) + 1
    return ", ".join(f"{n}x {k}" if n > 1 else k for k, n in names.items())


def _torch(env: RecordEnvironment) -> str:
    t = env.torch
    if t is None:
        return "absent"
    return f"{t.version}" + (f" cu{t.cuda}" if t.cuda else "")


def _packages(env: RecordEnvironment) -> str:
    got = [v for v in env.packages.values() if v]
    return ", ".join(got) if got else "none"


def _dispatch(env: RecordEnvironment) -> str:
    if not env.dispatch:
        return "none"
    return ", ".join(v if k == DISPATCH_ENV else f"{k}={v}" for k, v in env.dispatch.items())


def fingerprint(rec: RankRecord) -> OrderedDict[str, str]:
    """The fields compared across ranks, in the order differences are told."""
    fp: OrderedDict[str, str] = OrderedDict()
    if rec.stopped:
        fp["error"] = str(rec.error)
        fp["verdict"] = f"error (exit {rec.exit_code})"
        return fp
    env = rec.environment
    fp["kernelcheck"] = rec.kernelcheck or "?"
    fp["GPU"] = _gpu(env.gpus)
    fp["driver"] = env.version("driver") or "none"
    fp["python"] = str(env.version("python"))
    fp["torch"] = _torch(env)
    for k in ("triton", "transformers", "kernels"):
        fp[k] = env.version(k) or "absent"
    fp["kernel packages"] = _packages(env)
    fp["dispatch variables"] = _dispatch(env)
    fp["model"] = str(rec.model.id if rec.model is not None else None)
    fp["mode"] = str(rec.mode)
    for f in rec.functions:
        fp[f"{f.name}"] = f"{f.status} ({f.implementation})"
    fp["verdict"] = str(rec.verdict)
    return fp


def groups(records: list[RankRecord]) -> list[list[RankRecord]]:
    """Ranks with identical fingerprints, largest group first (ties: lowest rank first)."""
    by: dict[tuple[tuple[str, str], ...], list[RankRecord]] = {}
    for rec in records:
        by.setdefault(tuple(fingerprint(rec).items()), []).append(rec)
    return sorted(by.values(), key=lambda g: (-len(g), _label_key(g[0])))


def _label_key(rec: RankRecord) -> tuple[int, str]:
    return (rec.rank if rec.rank is not None else 1 << 30, rec.label or "")


def label(rec: RankRecord) -> str:
    """`rank 2 (node03)` for gathered records, the file's name for compared ones."""
    if rec.rank is not None:
        return f"rank {rec.rank}" + (f" ({rec.host})" if rec.host else "")
    return rec.label or rec.host or "?"


def _span(recs: list[RankRecord], limit: int = 12) -> str:
    names = [label(r) for r in recs]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


@dataclass(frozen=True)
class FieldDiff:
    """One fingerprint field where an odd group differs from the largest: its value there and in the others."""

    field: str
    value: str
    others: str

    def to_json(self) -> dict[str, str]:
        return {"field": self.field, "value": self.value, "others": self.others}


@dataclass(frozen=True)
class Difference:
    """A group that is not the largest: its ranks' labels and the fields where it differs."""

    ranks: list[str]
    fields: list[FieldDiff]

    def to_json(self) -> dict[str, Any]:
        return {"ranks": list(self.ranks), "fields": [f.to_json() for f in self.fields]}


def differences(records: list[RankRecord]) -> list[Difference]:
    """One entry per group that is not the largest: who, and each field where it differs from the largest."""
    gs = groups(records)
    if len(gs) < 2:
        return []
    ref = fingerprint(gs[0][0])
    out = []
    for g in gs[1:]:
        fp = fingerprint(g[0])
        fields = [FieldDiff(k, fp.get(k, "absent"), ref.get(k, "absent"))
                  for k in OrderedDict.fromkeys([*ref, *fp]) if fp.get(k) != ref.get(k)]
        out.append(Difference([label(r) for r in g], fields))
    return out


def _row(rec: RankRecord, functions: list[str]) -> list[str]:
    fp = fingerprint(rec)
    if rec.stopped:
        return [label(rec), "-", "-", "-", "-", "-", "-", *(["-"] * len(functions)), f"error: {clip(fp['error'], 60)}"]
    statuses: dict[str, str] = {f.name: f.status for f in rec.functions}
    marks = [s if s == Status.FAST else STATUS_WORDS.get(s, s.upper())
             for s in (statuses.get(n, "-") for n in functions)]
    return [label(rec), fp["GPU"], fp["driver"], fp["torch"], fp["triton"], fp["transformers"],
            fp["kernel packages"], *marks, str(rec.verdict).upper()]


def _function_names(records: list[RankRecord]) -> list[str]:
    names: OrderedDict[str, None] = OrderedDict()
    for rec in records:
        for f in rec.functions:
            names[f.name] = None
    return list(names)


TABLE_WIDTH = 100  # the table's rows are never wrapped: they fit the width a pipe or CI log gets
_ENV_COLUMNS = range(1, 7)  # GPU, driver, torch, triton, transformers, kernel packages


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _fitted(rows: list[list[str]], data: list[int], width: int) -> tuple[list[list[str]], list[str]]:
    """The table's columns that hold one value on every rank said once above it ("all: ..."), then the widest
    environment column cut ("...") until each row fits `width`: the differences below name every full value."""
    common = [i for i in _ENV_COLUMNS if data and len({rows[r][i] for r in data}) == 1]
    said = [f"{rows[0][i]} {rows[data[0]][i]}" for i in common]
    rows = [[c for i, c in enumerate(row) if i not in common] for row in rows]
    env = [i for i in range(1, 7 - len(common))]
    while env and max(len(line) for line in _grid(rows)) > width:
        widths = {i: max(len(r[i]) for r in rows) for i in env}
        col = max(env, key=lambda i: widths[i])
        over = max(len(line) for line in _grid(rows)) - width
        keep = max(widths[col] - over, 8)
        rows = [[c if i != col or len(c) <= keep else c[:keep - 3] + "..." for i, c in enumerate(r)] for r in rows]
        if keep == 8:
            env.remove(col)
    return rows, ([f"  all: {' · '.join(said)}"] if said else [])


def table_lines(records: list[RankRecord], missing: dict[int, Missing], width: int = TABLE_WIDTH) -> list[str]:
    functions = _function_names(records)
    head = ["rank", "GPU", "driver", "torch", "triton", "transformers", "kernel packages",
            *[f"F{i + 1}" for i in range(len(functions))], "verdict"]
    rows = [head]
    shown = sorted(records, key=_label_key) if len(records) <= ROWS_PER_RANK_UP_TO else []
    if shown:
        rows += [_row(r, functions) for r in shown]
    else:  # one row per group: thousands of identical rows say nothing
        for g in groups(records):
            row = _row(g[0], functions)
            row[0] = f"{plural(len(g), 'rank')}: {_span(g, 4)}"
            rows.append(row)
    data = [i for i, rec in enumerate(shown or [g[0] for g in groups(records)], 1) if not rec.stopped]
    rows += [[f"rank {r}", *(["-"] * (len(head) - 2)), "MISSING"] for r in sorted(missing)]  # why: below
    rows, said = _fitted(rows, data, width)
    out = said + _grid(rows)
    out += [f"  F{i + 1} = {n}" for i, n in enumerate(functions)]
    return out


def render_text(command: str, records: list[RankRecord], missing: dict[int, Missing], code: int,
                message: str | None = None, head: str | None = None) -> str:
    """The fleet table; `head` replaces the first line (the Ray driver's gather names itself)."""
    total = len(records) + len(missing)
    out = [head or (f"kernelcheck {command} --all-ranks · {plural(total, 'rank')}" if command != "compare"
                    else f"kernelcheck compare · {plural(total, 'report')}")]
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
            out.append(f"  ODD {', '.join(d.ranks[:12])}" + (" ..." if len(d.ranks) > 12 else "") + ":")
            out += [f"      {f.field}: {f.value}   (others: {f.others})" for f in d.fields]
        for r, m in sorted(missing.items()):
            out.append(f"  MISSING rank {r}: {missing_reason(m)}")
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


def to_json(command: str, records: list[RankRecord], missing: dict[int, Missing], code: int,
            message: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    gs = groups(records)
    return {
        "schema": FLEET_SCHEMA, "command": command, "kernelcheck": __version__,
        "verdict": _verdict(code), "exit_code": code,
        "size": len(records) + len(missing), "message": message,
        "groups": [[label(r) for r in g] for g in gs],
        "differences": [d.to_json() for d in differences(records)],
        "missing": [{"rank": r, "reason": missing_reason(m), "kind": m.kind} for r, m in sorted(missing.items())],
        "ranks": [r.to_json() for r in sorted(records, key=_label_key)],
        **(extra or {}),
    }
