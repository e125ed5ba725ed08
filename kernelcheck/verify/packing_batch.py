"""`verify --model M --packing --batch FILE` (or `--collator module:callable --lengths FILE`): the job's own batch.

1. The batch is read and checked as data (packing/batchfile.py, bad input exit 2) and its metadata linted
   against the keys the model's real forward accepts (packing/lint.py) before anything runs.
2. The model's tiny shape is built from its config (verify/layers.py, the layers verify runs) and one training
   forward of the whole batch runs as the job's `model(**batch)` would, with the bound functions and the
   attention wrapped (verify/packing_reach.py): which of cu_seqlens / seq_idx reached each kernel.
3. The same forward and a backward, packed and each segment alone: per segment the max |diff| of the logits and
   of the gradient at the input embeddings (a fixed random projection of the logits is the loss, so each
   token's gradient is its own segment's), relative to the alone run, and the worst token's distance, against
   the threshold its two controls place on the same weights and tokens (verify/packing_controls.py: the segments
   packed clean must be equal, with every boundary removed must differ; when they do not separate, the check
   cannot decide here). A segment beyond it names the first decoder layer whose output differs. Before any
   number: a recurrent kernel that got no boundary on a row of several sequences is broken from the reach alone.
On CPU this runs transformers' torch path (which refuses cu_seqlens/seq_idx since 5.20: a finding, exit 3);
on a GPU, whatever transformers bound (fla, causal-conv1d).
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import TYPE_CHECKING, Any

from kernelcheck.core.status import Finding, Severity
from kernelcheck.packing import batchfile, lint
from kernelcheck.report import progress
from kernelcheck.report.packing_batch import BatchInfo, BatchSection, Control, Controls, FunctionReach, SegmentDiff
from kernelcheck.report.wrap import clip
from kernelcheck.verify import layers, packing_controls
from kernelcheck.verify.packing_reach import Reach

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

log = logging.getLogger(__name__)
GUARD_TEXT = "can't keep packed sequences apart"  # matrix/packing.toml [guard] text (transformers' refusal)
REF = "measured: verify --packing --batch (packed vs each segment alone, forward and backward)"


def device_dtype() -> tuple[str, str]:
    """verify's: the GPU in bfloat16, else the CPU in float32."""
    import torch

    return ("cuda:0", "bfloat16") if torch.cuda.is_available() else ("cpu", "float32")


def _decoder_layers(lm: Any) -> list[Any]:
    base = getattr(lm, "model", None) or getattr(lm, "backbone", None) or lm
    return list(getattr(base, "layers", None) or [])


def _rel(a: Any, b: Any) -> tuple[float, float]:
    """(max |a - b|, ||a - b|| / ||b||): the second is what verify's tolerance bounds (matrix/verify.toml)."""
    if not a.numel():
        return 0.0, 0.0
    diff = a.float() - b.float()
    norm = float(b.float().norm())
    return float(diff.abs().max()), float(diff.norm()) / norm if norm > 0 else float(diff.norm())


class Runner:
    """One model, one batch: the packed run and each segment alone, with decoder-layer outputs recorded."""

    def __init__(self, built: Any, tensors: dict[str, Any], device: str):
        import torch

        self.lm = built.model
        self.device = device
        self.layer_types = built.layer_types
        vocab = int(self.lm.get_input_embeddings().num_embeddings)
        ids = tensors["input_ids"]
        self.remapped = bool(int(ids.max()) >= vocab or int(ids.min()) < 0)
        self.ids = (ids.long() % vocab).to(device)
        self.meta = {k: (v.to(device) if hasattr(v, "to") else v) for k, v in tensors.items()
                     if k not in ("input_ids", "labels")}
        gen = torch.Generator().manual_seed(0)
        self.proj = torch.randn(self.ids.shape[1], vocab, generator=gen).to(device)

    def run(self, a: int, b: int, packed: bool, meta: dict[str, Any] | None = None) -> tuple[Any, Any, list[Any]]:
        """(logits, grad at the input embeddings, each decoder layer's output) of tokens a:b; packed: with the
        batch's metadata (or `meta`, a control's)."""
        outs: list[Any] = []
        hooks = [layer.register_forward_hook(
            lambda _m, _a, o: outs.append((o[0] if isinstance(o, tuple) else o).detach()))
            for layer in _decoder_layers(self.lm)]
        try:
            emb = self.lm.get_input_embeddings()(self.ids[:, a:b]).detach().requires_grad_(True)
            kw = (self.meta if meta is None else meta) if packed else {}
            logits = self.lm(inputs_embeds=emb, use_cache=False, **kw).logits
            (logits.float() * self.proj[a:b]).sum().backward()
        finally:
            for h in hooks:
                h.remove()
        self.lm.zero_grad(set_to_none=True)
        assert emb.grad is not None
        return logits.detach(), emb.grad.detach(), outs

    def alone(self, segs: tuple[tuple[int, int], ...], again: str = "") -> list[tuple[Any, Any, list[Any]]]:
        """Each segment run alone, forward and backward, saying which one on the progress line (a long row of
        many segments takes minutes on the CPU)."""
        runs = []
        for i, (a, b) in enumerate(segs, 1):
            progress.doing(f"segment {i} of {len(segs)} run alone{again} (fwd+bwd)")
            runs.append(self.run(a, b, packed=False))
        return runs

    @staticmethod
    def _distance(packed: tuple[Any, Any, list[Any]], alone: tuple[Any, Any, list[Any]], a: int,
                  b: int) -> tuple[float, int]:
        lo = packing_controls.token_distance(packed[0][:, a:b], alone[0])
        gr = packing_controls.token_distance(packed[1][:, a:b], alone[1])
        return max(lo, gr)

    def _control(self, kind: str, segs: tuple[tuple[int, int], ...], alone: list[tuple[Any, Any, list[Any]]],
                 meta: dict[str, Any] | None, watch: Any = None) -> tuple[Control, list[FunctionReach]]:
        """A control's distances: the same tokens packed with `meta` (None: each segment alone again), with
        `watch` (a Reach) recording which keys reached each kernel."""
        reached: list[FunctionReach] = []
        try:
            if meta is None:
                runs = [(r, 0, b - a) for r, (a, b) in zip(self.alone(segs, " again"), segs, strict=True)]
            else:
                progress.doing(f"{kind} control (packed row again)")
                with watch if watch is not None else contextlib.nullcontext():
                    whole = self.run(0, int(self.ids.shape[1]), packed=True, meta=meta)
                reached = watch.result() if watch is not None else []
                runs = [(whole, a, b) for a, b in segs]
        except Exception as exc:  # noqa: BLE001 - a control the forward refuses is a fact of the run
            err = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return Control(kind, math.nan, (), err), reached
        per = tuple(round(self._distance(r, al, a, b)[0], 6) for (r, a, b), al in zip(runs, alone, strict=True))
        return Control(kind, max(per, default=0.0), per), reached

    def controls(self, segs: tuple[tuple[int, int], ...], alone: list[tuple[Any, Any, list[Any]]],
                 accepted: frozenset[str] | None, watch: Any = None, facts: dict[str, Any] | None = None) -> Controls:
        """The negative control is the clean packing where every recurrent kernel got its boundary from it; where
        the forward refuses it, or a kernel dropped it (then it is no control of equality), a second alone run."""
        neg, reached = self._control(packing_controls.CLEAN, segs, alone,
                                     packing_controls.clean_meta(segs, accepted, self.device), watch)
        dropped = packing_controls.certain_findings(reached, packing_controls.clean_view(segs), segs, facts or {})
        if neg.error is not None or dropped:
            log.info("packing: the clean control %s; the negative control is a rerun",
                     f"raised ({neg.error})" if neg.error else "did not reach every kernel")
            neg, _ = self._control(packing_controls.RERUN, segs, alone, None)
        pos, _ = self._control(packing_controls.REMOVED, segs, alone,
                               packing_controls.removed_meta(int(self.ids.shape[1]), self.device))
        return packing_controls.decide(neg, pos)

    def compare(self, segs: tuple[tuple[int, int], ...], packed: tuple[Any, Any, list[Any]],
                accepted: frozenset[str] | None = None, watch: Any = None,
                facts: dict[str, Any] | None = None) -> tuple[list[SegmentDiff], Controls | None]:
        """Each segment alone against `packed` (the packed run's logits, gradients and layer outputs), and the
        controls that place the threshold (none for one segment: nothing to keep apart)."""
        logits, grad, louts = packed
        alone = self.alone(segs)
        ctl = self.controls(segs, alone, accepted, watch, facts) if len(segs) > 1 else None
        limit = ctl.threshold if ctl is not None and ctl.threshold is not None else math.inf
        out = []
        for i, ((a, b), (al, ag, aouts)) in enumerate(zip(segs, alone, strict=True)):
            od, orel = _rel(logits[:, a:b], al)
            gd, grel = _rel(grad[:, a:b], ag)
            dist, tok = self._distance(packed, (al, ag, aouts), a, b)
            lo_dist = packing_controls.token_distance(logits[:, a:b], al)[0]
            wrong = dist > limit
            first = None
            if wrong and lo_dist > limit:
                first = next((f"layer {k} ({self.layer_types[k] if k < len(self.layer_types) else '?'})"
                              for k, (p, q) in enumerate(zip(louts, aouts, strict=False))
                              if packing_controls.token_distance(p[:, a:b], q)[0] > limit), "the output head")
            out.append(SegmentDiff(i, a, b, round(od, 6), round(orel, 6), round(gd, 6), round(grel, 6), wrong, first,
                                   round(dist, 6), tok))
        return out, ctl


def _raised_findings(sec: BatchSection, functions: tuple[str, ...]) -> list[Finding]:
    err = sec.error or ""
    torch_refused = GUARD_TEXT in err or any(r.error and GUARD_TEXT in r.error and not r.fast for r in sec.reach)
    if torch_refused:
        return [Finding("packing-torch-path-refuses", Severity.FALLBACK,
                        f"the packed forward raised on transformers' torch path ({clip(err, 160)}): it refuses "
                        "cu_seqlens/seq_idx because it cannot keep the sequences apart, so the segments were not "
                        "compared here",
                        "install fla-core and causal-conv1d (the kernels that take cu_seqlens and seq_idx) and run "
                        "this check where the job runs", REF, functions)]
    where = next((r.function for r in sec.reach if r.error), None)
    return [Finding("packing-batch-raises", Severity.BROKEN,
                    f"the packed forward raised{f' in {where}' if where else ''}: {clip(err, 200)}",
                    "fix the batch metadata the lint names (above), or the kernel call that raised", REF,
                    (where,) if where else functions)]


def measured_findings(sec: BatchSection, functions: tuple[str, ...]) -> list[Finding]:
    """The comparison as findings: a raise, or each wrong segment (broken: exit 4), or one info line."""
    if sec.error is not None:
        return _raised_findings(sec, functions)
    c = sec.controls
    if c is not None and not c.decided:
        return [packing_controls.cannot_decide(sec, functions)]
    bad = [s for s in sec.segments if s.wrong]
    if not bad:
        within = (f"within {c.threshold:.2g}, the threshold between its controls ({packing_controls.control_line(c)})"
                  if c is not None and c.threshold is not None else "(one segment: nothing to keep apart)")
        return [Finding("packing-segments-match", Severity.INFO,
                        f"every segment ({len(sec.segments)}) matches its alone run {within} ({sec.dtype}), forward "
                        "and backward", None, REF, functions)]
    first = next((s for s in bad if s.first_layer), bad[0])
    where = f"first at {first.first_layer}" if first.first_layer else "in the backward only"
    limit = (f"the threshold {c.threshold:.2g} between its controls ({packing_controls.control_line(c)}; "
             if c is not None and c.threshold is not None else f"the tolerance {sec.tolerance:g} (")
    return [Finding("packing-segment-mixed", Severity.BROKEN,
                    f"segment {first.index} (tokens {first.start}:{first.end}) differs from its alone run by "
                    f"{first.token_distance:.2g} at token {first.start + first.worst_token} "
                    f"({first.output_rel_l2:.2g} / {first.grad_rel_l2:.2g} relative L2, outputs / grads), beyond "
                    f"{limit}{sec.dtype}), {where}; {len(bad)} of {len(sec.segments)} segments differ: the packed "
                    "sequences mix",
                    "pass cu_seq_lens_q/k and seq_idx that agree with the packed sequences "
                    "(DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)) and install "
                    "fla-core and causal-conv1d, forward without a cache", REF, functions)]


def check(query: str, loaded: batchfile.LoadedBatch, compare: bool = True, *,
          m: Matrix) -> tuple[Any, BatchSection, list[Finding]]:
    """(the resolved model, the section, every finding: the lint's, then the measurement's)."""
    import torch

    from kernelcheck.integrations import transformers, transformers_models
    from kernelcheck.integrations.transformers_logs import quiet_fallback_lines
    from kernelcheck.packing.decide import load_facts

    model = transformers_models.resolve(query, m=m)
    device, dtype = device_dtype()
    tol = float(layers.verify_data(m=m)["tolerance"][dtype])
    with quiet_fallback_lines():
        built = layers.build(model, "tiny", device, dtype, None, m=m)
        accepted = lint.accepted_keys(type(built.model).forward)
        problems = lint.lint(loaded.view, accepted, stateful=bool(set(model.spec.functions) & set(
            load_facts(m=m)["functions"])))
        segs, segs_from = lint.segments(loaded.view)
        every = packing_controls.boundaries(loaded.view)
        if len(every) > len(segs):  # one source misses starts another shows: compare at every start
            segs, segs_from = every, "every boundary source"
        runner = Runner(built, loaded.tensors, device)
        info = BatchInfo(loaded.source, loaded.view.tokens,
                         {k: (f.dtype, f.shape) for k, f in loaded.view.fields.items()}, segs, segs_from,
                         runner.remapped)
        sec = BatchSection(info, device, dtype, tol)
        result = transformers.bind(model.spec.module, model.spec.functions, exact=True, m=m)
        reach = Reach(result.module, result.bindings, built.attn_implementation)
        built.model.train()
        if any(p.finding.severity == Severity.BROKEN for p in problems):
            sec.ran = False  # offsets no kernel can take: a GPU kernel would read past the tokens
            return model, sec, [p.finding for p in problems]
        try:
            progress.doing(f"the packed row of {loaded.view.tokens:,} tokens (fwd+bwd)")
            with reach, torch.enable_grad():
                packed = runner.run(0, loaded.view.tokens, packed=True)
            if compare:
                sec.segments, sec.controls = runner.compare(
                    segs, packed, accepted, Reach(result.module, result.bindings, built.attn_implementation),
                    load_facts(m=m))
        except Exception as exc:  # noqa: BLE001 - the job's batch raising in the forward is the result
            sec.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        sec.reach = reach.result()
    fns = tuple(r.function for r in sec.reach)
    certain = packing_controls.certain_findings(sec.reach, loaded.view, segs, load_facts(m=m))
    measured = measured_findings(sec, fns)
    if certain:  # the reach decided: the measurement says how much, never that the segments match
        measured = [f for f in measured if f.id != "packing-segments-match"]
    return model, sec, [p.finding for p in problems] + certain + measured
