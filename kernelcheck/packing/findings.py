"""The packing section as report findings: one line by default, the table and a verdict with --packing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcheck.core.status import Finding, Severity
from kernelcheck.report.model import Report
from kernelcheck.report.sections import ModeOutcome, PackingSection

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def findings(sec: PackingSection) -> list[Finding]:
    modes = {m.mode: m for m in sec.modes}
    ref = sec.reference
    fns = tuple(sec.functions)
    declared = sec.declared
    if declared is None:
        return [Finding("packing", Severity.INFO, undeclared_message(modes),
                        modes["flash"].fix or modes["position_ids"].fix, ref, fns)]
    out = [Finding(f"packing-{m}", Severity.INFO, f"packing {m}: {o.outcome}: {o.reason}", o.fix, ref, fns)
           for m, o in modes.items() if m != declared]
    o = modes[declared]
    sev = {"correct": Severity.INFO, "raises": Severity.BROKEN, "mixed": Severity.BROKEN}[o.outcome]
    word = {"correct": "correct", "raises": "the step raises ValueError",
            "mixed": "sequences silently mix (wrong results, no error)"}[o.outcome]
    out.insert(0, Finding("packing-declared", sev, f"packing {declared} (declared): {word}: {o.reason}",
                          o.fix, ref, fns))
    if declared != "none" and sec.cache_skips_packing:
        out.append(Finding("packing-needs-no-cache", Severity.WARNING,
                           "packed rows stay apart in the attention layers (sdpa, eager, flex) only when the forward "
                           "runs without a cache: with one, transformers does not look for the sequences in "
                           "position_ids, and a causal LM makes one whenever use_cache is on and gradient "
                           "checkpointing is off (in training too); doctor cannot see the job's forward",
                           "model.config.use_cache = False (or pass use_cache=False, or train with gradient "
                           "checkpointing, which turns the cache off)", CACHE_REF, fns))
    return out


CACHE_REF = ("transformers 5.24.0 masking_utils.py _preprocess_mask_arguments (find_packed_sequence_indices only "
             "without a cache): https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/masking_utils.py")
# what each packing mode is, in the collator's words (docs/packing.md "Packing modes"), and each outcome
_MODE_WORDS = {"none": "no packing (one sequence per row)", "position_ids": "position_ids only (TRL padding_free)",
               "cu_seq_lens": "cu_seq_lens", "flash": "cu_seq_lens + seq_idx"}
_OUTCOME_WORDS = {"correct": "correct", "raises": "the step raises ValueError",
                  "mixed": "sequences mix silently (wrong results)"}


def undeclared_message(modes: dict[str, ModeOutcome]) -> str:
    """The one packing line when the job did not say how it packs: each mode, what happens, how to declare."""
    said = "; ".join(f"{_MODE_WORDS.get(m, m)}: {_OUTCOME_WORDS.get(o.outcome, o.outcome)}"
                     for m, o in modes.items())
    return (f"packed batches (several sequences in one row) with this model here: {said}. "
            f"Say what the job's collator passes with --packing {'|'.join(modes)}")


def attach(report: Report, declared: str | None, *, m: Matrix) -> None:
    """Add the packing section to a doctor report (a no-op for models without packing-sensitive layers)."""
    from kernelcheck.core.errors import BadInput
    from kernelcheck.packing.decide import load_facts, section

    if report.model is None:
        if declared is not None:
            raise BadInput("--packing needs --model: packing correctness depends on the model's layers.")
        return
    sec = section({f.name: f.status for f in report.functions if f.used}, declared, load_facts(m=m))
    if sec is None:
        return
    report.packing = sec
    report.findings.extend(findings(sec))
