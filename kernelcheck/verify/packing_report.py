"""`verify --packing [MODE]`: the measurement (verify/packing.py) beside doctor's decision, and the verdict.

The verdict is the verdict doctor gives for the same mode (`doctor --packing MODE`): exit 0 when MODE keeps the
sequences apart here, 4 when they mix or the step raises. Without MODE it is the verdict of the mode doctor
recommends (flash: DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)). A mode
where the measurement and doctor's decision differ is named (the measurement decides the exit code).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelcheck.core import jsonout
from kernelcheck.core.status import EXIT_CODE, EXIT_READY, Status, Verdict
from kernelcheck.packing.decide import RECOMMENDED
from kernelcheck.report.sections import ModelRef
from kernelcheck.verify.packing import MODES, PackingResult, render_text

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

log = logging.getLogger(__name__)


def verdict(results: list[PackingResult], declared: str | None) -> tuple[Verdict, int]:
    """(ready | broken, its exit code) for the declared mode, or the recommended one."""
    want = declared or RECOMMENDED
    if want == "none":
        return Verdict.READY, EXIT_CODE[Verdict.READY]
    got = next(r for r in results if r.mode == want)
    word = Verdict.READY if got.outcome == "correct" else Verdict.BROKEN
    return word, EXIT_CODE[word]


def doctor_outcomes(module: str, functions: tuple[str, ...], *, m: Matrix) -> dict[str, str]:
    """doctor's packing decision per mode for the functions transformers binds here (packing/decide.py)."""
    from kernelcheck.integrations import transformers
    from kernelcheck.packing.decide import load_facts, section

    result = transformers.bind(module, functions, exact=True, m=m)
    statuses: dict[str, str] = {f: (Status.FAST if b.bound == "package" else Status.FALLBACK)
                                for f, b in result.bindings.items()}
    sec = section(statuses, None, load_facts(m=m))
    return {m.mode: m.outcome for m in (sec.modes if sec is not None else ())}


def _tail(results: list[PackingResult], declared: str | None, code: int) -> list[str]:
    want = declared or RECOMMENDED
    out = [f"mode {r.mode}: measured {r.outcome}, doctor decides {r.doctor}: the measurement decides"
           for r in results if r.doctor is not None and r.doctor != r.outcome]
    if code == EXIT_READY:
        out.append(f"verdict: READY: packing mode {want} keeps the sequences apart here")
    else:
        out.append(f"verdict: BROKEN: packing mode {want} does not keep the sequences apart here (exit {code})")
        out.append("  fix: pad instead, or install fla-core and causal-conv1d and use DataCollatorWithFlattening("
                   "\n  return_flash_attn_kwargs=True, return_seq_idx=True), forward without a cache")
    return out


@dataclass(frozen=True)
class PackingRun:
    """What `verify --packing [MODE]` measured: the model, the device, each mode's result beside doctor's decision,
    the cached forward's largest logit difference, the declared mode, and the verdict."""

    model: ModelRef
    device: str
    results: list[PackingResult]
    cached: float
    declared: str | None
    verdict: Verdict

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[self.verdict]

    def to_json(self) -> dict[str, Any]:
        from kernelcheck import schemas

        return {"schema": schemas.schema_id("verify-packing"), "command": "verify", "verdict": self.verdict,
                "exit_code": self.exit_code, "model": self.model.to_json(), "device": self.device,
                "declared": self.declared, "judged_mode": self.declared or RECOMMENDED,
                "packing": [r.as_dict() for r in self.results], "cached_forward_max_logit_diff": round(self.cached, 6)}

    def render(self, as_json: bool) -> str:
        if as_json:
            return jsonout.dumps(self.to_json(), indent=2)
        return "\n".join([render_text(self.results, self.device, self.cached),
                          *_tail(self.results, self.declared, self.exit_code)])


def measure(query: str, declared: str | None = None, *, m: Matrix) -> PackingRun:
    """`verify --model M --packing [MODE]`: measured, beside doctor's decision, and judged."""
    import torch

    from kernelcheck.core.errors import BadInput
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import packing

    model = transformers_models.resolve(query, m=m)
    if "chunk_gated_delta_rule" not in model.spec.functions:
        raise BadInput(f"verify --packing measures the Gated DeltaNet + short conv path (Qwen3.5/3.6/3.8, "
                       f"Qwen3-Next); {query} ({model.model_type}) does not use it. Use `kernelcheck doctor "
                       f"--model {query} --packing MODE` for the decision from source.")
    if declared is not None and declared not in (*MODES, "none"):
        raise BadInput(f"--packing {declared!r} is not a packing mode. Use one of: none, {', '.join(MODES)}.")
    from kernelcheck.report.progress import working

    device = "cuda" if torch.cuda.is_available() else "cpu"
    # "kernelcheck verify --packing (still working, 30 s; mode 2 of 3 (cu_seq_lens), 60+70 tokens)"
    with working("kernelcheck verify --packing", announce=True):
        results = packing.measure_all(device, m=m)
    decided = doctor_outcomes("qwen3_5", model.spec.functions, m=m)  # the module of the measured tiny model
    for r in results:
        r.doctor = decided.get(r.mode)
    with working("verify --packing: the cached forward", announce=True):
        cached = packing.cached_forward(device, m=m)
    word, _ = verdict(results, declared)
    return PackingRun(ModelRef.of(model), device, results, cached, declared, word)


def command(query: str, as_json: bool, declared: str | None = None, *, m: Matrix) -> tuple[str, int]:
    """`verify --model M --packing [MODE]`: (output, exit code)."""
    run = measure(query, declared, m=m)
    return run.render(as_json), run.exit_code
