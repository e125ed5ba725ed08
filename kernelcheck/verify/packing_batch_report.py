"""`verify --packing` on the job's own batch (--batch FILE, or --collator module:callable --lengths FILE) and the
payoff (--benchmark [--lengths FILE]): the command's output and exit code.

The verdict is core/decide.py's over the findings: the lint's (warnings; offsets no kernel can take are broken and
the forward is not run), then the measurement's: a segment measured wrong beyond the dtype's tolerance is broken
(exit 4), transformers' torch path refusing the batch's cu_seqlens/seq_idx is a fallback (exit 3), every segment
matching is ready (exit 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelcheck.core import decide
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import EXIT_CODE, Finding, Severity, Verdict
from kernelcheck.packing import batchfile
from kernelcheck.report.packing_batch import BatchSection, Payoff, payoff_lines, render

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def read_lengths(path: str | None) -> list[int] | None:
    """--lengths FILE: the `padding` command's reader (a lengths file, JSONL or Parquet/Arrow with input_ids)."""
    if path is None:
        return None
    from kernelcheck.padding.lengths import stream

    out = [n for n in stream(path) if n > 0]
    if not out:
        raise BadInput(f"--lengths {path} holds no positive length. Nothing was run.")
    return out


def load_batch(batch: str | None, collator: str | None, lengths: list[int] | None, query: str, *,
               m: Matrix) -> batchfile.LoadedBatch | None:
    from kernelcheck.verify import packing_bounds

    if batch is not None:
        packing_bounds.check_file(batch)
        return batchfile.load(batch)
    if collator is None:
        return None
    if lengths is None:
        raise BadInput("--collator needs --lengths FILE: the lengths of the examples the collator packs into one "
                       "batch. Nothing was run.")
    packing_bounds.check_lengths(lengths, f"--lengths for --collator {collator}")
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import layers

    cfg, _ = layers.shaped_config(transformers_models.resolve(query, m=m), "tiny", m=m)
    return batchfile.collate(collator, lengths, int(getattr(cfg, "vocab_size", 128) or 128))


def _payoff_finding(p: Payoff) -> Finding:
    return Finding("packing-payoff", Severity.INFO,
                   f"one training step on the same {p.real_tokens:,} tokens: packed {p.ratio:.2f}x the padded step "
                   f"({p.shape} shape, {p.device}); padding was {p.padding_fraction:.1%} of the computed tokens",
                   None, "measured: verify --packing --benchmark")


def run(query: str, batch: str | None, collator: str | None, lengths_file: str | None,
        benchmark: bool, *, m: Matrix) -> tuple[Any, BatchSection | None, Payoff | None, list[Finding]]:
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import packing_batch, packing_payoff

    lengths = read_lengths(lengths_file)
    loaded = load_batch(batch, collator, lengths, query, m=m)
    model = transformers_models.resolve(query, m=m)
    findings: list[Finding] = []
    sec = None
    if loaded is not None:
        from kernelcheck.packing import lint
        from kernelcheck.verify import packing_bounds

        packing_bounds.check_row(loaded.view.tokens, len(lint.segments(loaded.view)[0]), loaded.source)
        model, sec, findings = packing_batch.check(query, loaded, m=m)
    payoff = None
    if benchmark:
        if lengths:
            from kernelcheck.verify import packing_bounds

            # the padded step is the larger one: every example padded to the longest
            packing_bounds.check_row(len(lengths) * max(lengths), 0, "--lengths for --benchmark (padded)")
        from kernelcheck.report import progress

        progress.doing("timing the padded and the packed step (--benchmark)")
        payoff = packing_payoff.measure(query, lengths, m=m)
        findings.append(_payoff_finding(payoff))
        if sec is not None:
            sec.payoff = payoff
    return model, sec, payoff, findings


def to_json(model: Any, sec: BatchSection | None, payoff: Payoff | None, findings: list[Finding]) -> dict[str, Any]:
    from kernelcheck import schemas
    from kernelcheck.report.packing_batch import finding_json
    from kernelcheck.report.sections import ModelRef

    verdict = decide.verdict([], findings)
    body = sec.to_json() if sec is not None else {"payoff": payoff.to_json() if payoff else None}
    device = sec.device if sec is not None else (payoff.device if payoff is not None else "")
    return {"schema": schemas.schema_id("verify-packing"), "command": "verify", "verdict": verdict.value,
            "exit_code": EXIT_CODE[verdict], "model": ModelRef.of(model).to_json(), "declared": None,
            "judged_mode": None, "packing": [],
            "findings": [finding_json(f) for f in findings], **body, "device": device}


def render_text(query: str, sec: BatchSection | None, payoff: Payoff | None, findings: list[Finding]) -> str:
    from kernelcheck.report.text import render_findings

    verdict = decide.verdict([], findings)
    lines = render(sec, query) if sec is not None else [f"kernelcheck verify --packing --benchmark: {query}"]
    if sec is None and payoff is not None:
        lines += payoff_lines(payoff)
    lines += render_findings(findings)
    lines.append(f"verdict: {verdict.value.upper()} (exit {EXIT_CODE[verdict]})")
    return "\n".join(lines)


@dataclass(frozen=True)
class BatchRun:
    """What `verify --packing --batch/--collator/--benchmark` measured, with its verdict (core/decide.py's over
    the findings)."""

    query: str
    model: Any
    section: BatchSection | None
    payoff: Payoff | None
    findings: list[Finding]

    @property
    def verdict(self) -> Verdict:
        return decide.verdict([], self.findings)

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[self.verdict]

    def render(self, as_json: bool) -> str:
        if as_json:
            return json.dumps(to_json(self.model, self.section, self.payoff, self.findings), indent=2)
        return render_text(self.query, self.section, self.payoff, self.findings)


def measure(query: str, batch: str | None, collator: str | None, lengths: str | None, benchmark: bool, *,
            m: Matrix) -> BatchRun:
    from kernelcheck.report.progress import working

    # the lines say which segment runs: "kernelcheck verify --packing (still working, 40 s; segment 120 of 256 run
    # alone (fwd+bwd))"
    with working("kernelcheck verify --packing", announce=True):
        return BatchRun(query, *run(query, batch, collator, lengths, benchmark, m=m))


def command(query: str, as_json: bool, batch: str | None, collator: str | None, lengths: str | None,
            benchmark: bool, *, m: Matrix) -> tuple[str, int]:
    """`verify --model M --packing --batch FILE | --collator X --lengths FILE | --benchmark`: (output, exit)."""
    model, sec, payoff, findings = run(query, batch, collator, lengths, benchmark, m=m)
    code = EXIT_CODE[decide.verdict([], findings)]
    if as_json:
        return json.dumps(to_json(model, sec, payoff, findings), indent=2), code
    return render_text(query, sec, payoff, findings), code


