"""The comparison half of tests/groundtruth.py: one (type, mode) row from the truth and doctor's report, and the
table the command prints."""

from __future__ import annotations

import functools
from typing import Any


def compare(obs: dict[str, Any], doc: dict[str, Any], mode: str) -> dict[str, Any]:
    """One (type, mode) row: agree when doctor's exit is the truth's and no function doctor calls fast ran torch."""
    t = obs.get("modes", {}).get(mode) or {"exit": None, "error": obs.get("error"), "calls": []}
    rep = doc["report"]
    fns = {f["name"]: f for f in rep.get("functions", [])}
    problems = []
    if obs.get("untested") or obs.get("error") or t.get("untested"):
        problems.append(f"no truth: {obs.get('untested') or obs.get('error') or t.get('untested')}")
    elif t["exit"] != doc["exit"]:
        problems.append(f"exit: truth {t['exit']}, doctor {doc['exit']}")
    problems += _function_problems(t["calls"], fns, rep)
    return {
        "model_type": obs["model_type"], "mode": mode, "truth_exit": t["exit"], "doctor_exit": doc["exit"],
        "agree": not problems, "problems": problems, "truth_error": t.get("error") or obs.get("build_error"),
        "truth_calls": sorted({f"{c['slot']}={'fast' if c['fast'] else 'torch'}:{c['callable']}"
                               for c in t["calls"]}),
        "doctor": {n: f"{f.get('status')}{'' if f.get('used', True) else ' (unused)'}" for n, f in fns.items()},
        "doctor_error": rep.get("error"),
    }


def _function_problems(calls: list[dict[str, Any]], fns: dict[str, dict[str, Any]],
                       rep: dict[str, Any]) -> list[str]:
    """Per function, what doctor says against what ran: a function that ran is reported and used in this mode;
    one that ran its torch path is not called fast, one that ran only its kernel is called fast. Layer methods
    (`Mamba2Mixer.torch_forward`) are no doctor function: the exit code covers them."""
    misnamed = _misnamed()
    ran: dict[str, set[bool]] = {}
    for c in calls:
        ran.setdefault(misnamed.get(c["slot"], c["slot"]), set()).add(bool(c["fast"]))
    out = []
    for name, kinds in sorted(ran.items()):
        f = fns.get(name)
        if f is None:
            if "." not in name and fns and not rep.get("error"):
                out.append(f"{name} ran ({'fast' if kinds == {True} else 'torch'}), doctor does not report it")
            continue
        if not f.get("used", True):
            out.append(f"{name} ran, doctor says it is not used in this mode")
        if False in kinds and f.get("status") == "fast":
            out.append(f"{name}: doctor says fast ({f.get('implementation')}), torch ran")
        if kinds == {True} and f.get("status") != "fast":
            out.append(f"{name}: doctor says {f.get('status')}, its kernel ran")
    return out


@functools.cache
def _misnamed() -> dict[str, str]:
    from kernelcheck.core import matrix as matrix_mod

    return {e["registered"]: e["function"] for e in matrix_mod.load().transformers.get("misnamed", [])}


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'model_type':<22} {'mode':<9} {'truth':>5} {'doctor':>6}  result"]
    for r in rows:
        word = "agree" if r["agree"] else "DISAGREE: " + "; ".join(r["problems"])
        lines.append(f"{r['model_type']:<22} {r['mode']:<9} {r['truth_exit']!s:>5} {r['doctor_exit']!s:>6}  {word}")
        if not r["agree"]:
            if r["truth_error"]:
                lines.append(f"{'':<33} truth raised: {r['truth_error']}")
            lines.append(f"{'':<33} truth ran: {', '.join(r['truth_calls']) or 'no slot'}")
            lines.append(f"{'':<33} doctor: {', '.join(f'{k}={v}' for k, v in r['doctor'].items())}")
    n = sum(r["agree"] for r in rows)
    lines.append(f"{n} of {len(rows)} agree")
    return "\n".join(lines)
