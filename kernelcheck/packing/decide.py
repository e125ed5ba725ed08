"""Decide, per packing mode, what the installed transformers and the bound kernels do with packed rows.

Facts (matrix/packing.toml) say which kwarg each kernel needs; the installed transformers' source says
whether the torch path refuses packed kwargs (the guard) or ignores them. One place decides the outcome.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Status
from kernelcheck.report.sections import ModeOutcome, PackingSection

log = logging.getLogger(__name__)

RECOMMENDED = "flash"  # the mode doctor's fix names; verify --packing builds its batches with the same flags


def fix_text(facts: dict[str, Any]) -> str:
    """doctor's fix: the collator call of the recommended mode, from matrix/packing.toml."""
    from kernelcheck.packing.batches import collator_call, collator_flags

    return (f"{collator_call(collator_flags(RECOMMENDED, facts))} (TRL: padding_free from trl 1.16.0, which "
            "passes cu_seq_lens and seq_idx; earlier releases pass position_ids only)")


def load_facts(*, m: matrix.Matrix) -> dict[str, Any]:
    """`m`'s packing.toml (checked: a KERNELCHECK_MATRIX_DIR copy is the user's file)."""
    return m.table("packing.toml")


def transformers_dir() -> Path | None:
    spec = importlib.util.find_spec("transformers")
    return Path(spec.origin).parent if spec and spec.origin else None


def has_guard(facts: dict[str, Any], tdir: Path | None) -> bool | None:
    """True/False from the installed source; None when transformers or the file is not there."""
    if tdir is None:
        return None
    f = tdir / facts["guard"]["file"]
    try:
        return facts["guard"]["text"] in f.read_text(encoding="utf-8", errors="replace")
    except OSError:
        log.info("packing: %s not readable; guard unknown", f)
        return None


def cache_skips_packing(facts: dict[str, Any], tdir: Path | None) -> bool | None:
    """True when the installed masking_utils looks for packed sequences only without a cache (matrix/packing.toml
    [cache]); None when transformers, the file or the fact is not there."""
    fact = facts.get("cache")
    if tdir is None or not fact:
        return None
    try:
        text = (tdir / fact["file"]).read_text(encoding="utf-8", errors="replace")
    except OSError:
        log.info("packing: %s not readable; cache condition unknown", tdir / fact["file"])
        return None
    return any(t in text for t in fact["texts"])


def _one(fn: str, fast: bool, needs: str, passes: list[str], guard: bool | None,
         pkg: str) -> tuple[str, str]:
    if needs not in passes:
        return "mixed", f"{fn} gets no {needs}, so its state runs across the sequence boundary"
    if fast:
        return "correct", f"{fn} runs {pkg}'s kernel with {needs}"
    if guard:
        return "raises", f"{fn} is on the torch path, which refuses {needs} (ValueError)"
    return "mixed", f"{fn} is on the torch path, which ignores {needs} in this transformers (no guard)"


def check_mode(mode: str, facts: dict[str, Any]) -> None:
    """BadInput unless `mode` is a packing mode of matrix/packing.toml (commands/doctor.py `check`)."""
    if mode not in facts["modes"]:
        raise BadInput(f"--packing {mode!r} is not a packing mode. Use one of: {', '.join(facts['modes'])} "
                       "(what the job's collator passes: nothing, position_ids only, flash kwargs without or with "
                       "seq_idx).")


def decide(mode: str, bound: dict[str, bool], facts: dict[str, Any], guard: bool | None) -> ModeOutcome:
    """bound: the model's packing-relevant functions -> True when the fast kernel is bound."""
    check_mode(mode, facts)
    passes = facts["modes"][mode]["passes"]
    if mode == "none":
        return ModeOutcome(mode, "correct", "one sequence per row", None)
    results = []
    for fn, fast in sorted(bound.items()):
        info = facts["functions"][fn]
        results.append((fn, info, *_one(fn, fast, info["needs"], passes, guard, info["package"])))
    for want in ("raises", "mixed"):
        hit = [r for r in results if r[2] == want]
        if hit:
            slow = sorted({r[1]["package"] for r in results if not bound[r[0]]})
            kernels = f"; install {', '.join(slow)} so the kernels take the packed kwargs" if slow else ""
            return ModeOutcome(mode, want, "; ".join(r[3] for r in hit), fix_text(facts) + kernels)
    return ModeOutcome(mode, "correct", "; ".join(r[3] for r in results), None)


def section(functions: dict[str, str], declared: str | None, facts: dict[str, Any],
            tdir: Path | None = None) -> PackingSection | None:
    """functions: name -> doctor status; `facts`: load_facts(m=...). None when the model has no packing-sensitive
    function."""
    bound = {fn: status == Status.FAST for fn, status in functions.items() if fn in facts["functions"]}
    if not bound:
        return None
    tdir = tdir if tdir is not None else transformers_dir()
    guard = has_guard(facts, tdir)
    outcomes = [decide(m, bound, facts, guard) for m in facts["modes"]]
    if declared is not None and declared not in facts["modes"]:
        decide(declared, bound, facts, guard)  # raises BadInput with the list of modes
    return PackingSection(declared, guard, bound, tuple(outcomes), cache_skips_packing(facts, tdir),
                          f"{facts['modes']['position_ids']['reference']}; {facts['guard']['reference']}")
