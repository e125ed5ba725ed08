"""verify --compile: the model's real layers under torch.compile, as a job that compiles the model runs them.

For each pass (infer: a forward without grad; train: forward + backward of the loss), on the shape verify builds
(verify/layers.py: tiny on any device, full on a GPU):
- graph breaks, with where and why: `torch._dynamo.explain` of the forward (Dynamo's own reasons and user stacks);
- which parts ran compiled and which eagerly: each part's class forward (the whole model, the decoder loop, the
  decoder layers, the GDN layers) counts the calls that run outside a Dynamo-compiled frame
  (`torch.compiler.is_compiling()` is False only there); a break in the decoder loop can make Dynamo skip the whole
  text-model frame, so every layer runs eagerly (axolotl#3734), and this is how that is seen;
- compiled vs eager time per step (after one warm-up step each; the first compiled step's time is the compile);
- the fix for each break, read from what is installed: fla's FLA_DISABLE_BACKEND_DISPATCH where fla's dispatch wraps
  the op in torch.compiler.disable (integrations/fla_dispatch.py `compile_wrap`), a torch.library.custom_op around
  an op torch.compiler.disable hides, and compiling each decoder layer (torch's nn.Module.compile) so that a break
  stays inside one layer.
On the CPU the backend is aot_eager (Dynamo + AOTAutograd, no C++ codegen: bounded time on a CI box); on a GPU
inductor, as jobs compile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kernelcheck.core.status import Finding, Severity
from kernelcheck.integrations import fla_dispatch
from kernelcheck.report.compiled import CompiledPass, CompiledSection, GraphBreak, PartRun
from kernelcheck.verify.compiled_calls import FusedCalls

TOKENS = {"tiny": 64, "full": 2048}
STEPS = 2  # timed steps per path, after one warm-up


def _short(path: str) -> str:
    for cut in ("site-packages/", "/kernelcheck/"):
        if cut in path:
            return path.split(cut, 1)[1]
    return path


def _frame(f: Any) -> str:
    return f"{_short(f.filename)}:{f.lineno} in {f.name}"


def _split(reason: str) -> tuple[str, str | None]:
    lines = [x.strip() for x in str(reason).splitlines() if x.strip()]
    head = lines[0] if lines else str(reason)
    why = next((x.split(":", 1)[1].strip() for x in lines if x.startswith("Explanation:")), None)
    return head[:300], (why[:400] if why else None)


def fix_for(reason: str, stack: list[str], wrap: fla_dispatch.CompileWrap | None) -> str | None:
    """The fix for one break, from its reason and stack and what the installed fla ships."""
    per_layer = ("compile each decoder layer instead of the whole model (for layer in model.model.layers: "
                 "layer.compile()), so a break stays inside one layer and the rest of it still compiles")
    if "torch.compiler.disable" in reason:
        in_fla = any("fla/" in s for s in stack)
        if in_fla and wrap is not None and wrap.switch:
            return ("FLA_DISABLE_BACKEND_DISPATCH=1: fla then calls its Triton kernels directly, without the "
                    "torch.compiler.disable wrapper of its backend dispatch (it also turns TileLang and FlashQLA "
                    "off: on Hopper with triton < 3.7.1 training then hits fla#640); or wrap the op in a "
                    f"torch.library.custom_op (as prime-rl does for fullgraph); or {per_layer}")
        return ("wrap the function in a torch.library.custom_op (with a register_fake for its output shapes) so "
                f"Dynamo traces one opaque op instead of breaking; or {per_layer}")
    return per_layer


def breaks_of(explain: Any, wrap: fla_dispatch.CompileWrap | None) -> list[GraphBreak]:
    """Distinct graph breaks of a `torch._dynamo.explain` result, most frequent first."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for r in getattr(explain, "break_reasons", []) or []:
        stack = list(getattr(r, "user_stack", []) or [])
        where = _frame(stack[-1]) if stack else "?"
        seen.setdefault((str(r.reason), where), [r, stack, 0])[2] += 1
    out = []
    for (reason, where), (_, stack, n) in seen.items():
        head, why = _split(reason)
        frames = [_frame(f) for f in stack]
        model = next((fr for fr in reversed(frames) if "/models/" in fr or "modeling_" in fr), None)
        out.append(GraphBreak(head, why, where, model, n, fix_for(reason, [f.filename for f in stack], wrap)))
    return sorted(out, key=lambda b: -b.count)


def _parts(lm: Any, gdn_class: str | None) -> list[tuple[str, type]]:
    base = getattr(lm, "model", None) or getattr(lm, "backbone", None)
    layers = list(getattr(base, "layers", None) or []) if base is not None else []
    parts: list[tuple[str, type]] = [("model", type(lm))]
    if base is not None:
        parts.append(("decoder-loop", type(base)))
    if layers:
        parts.append(("decoder-layer", type(layers[0])))
    gdn = next((type(m) for m in lm.modules() if gdn_class and type(m).__name__ == gdn_class), None)
    if gdn is not None:
        parts.append(("gdn-layer", gdn))
    return parts


@contextmanager
def counting(parts: list[tuple[str, type]]) -> Iterator[dict[str, list[int]]]:
    """Wrap each part's class forward to count its calls outside a Dynamo-compiled frame ([n]); inside one the
    check is False at trace time, so the compiled graph holds no counter (and no side effect Dynamo must replay)."""
    import torch

    counts: dict[str, list[int]] = {p: [0] for p, _ in parts}
    saved: list[tuple[type, Any]] = []
    for part, cls in parts:
        orig = cls.__dict__.get("forward")
        if orig is None:
            continue
        saved.append((cls, orig))

        def wrapper(self: Any, *a: Any, __orig: Any = orig, __c: list[int] = counts[part], **k: Any) -> Any:
            if not torch.compiler.is_compiling():
                __c[0] += 1
            return __orig(self, *a, **k)

        setattr(cls, "forward", wrapper)  # noqa: B010 - a class attribute put back below
    try:
        yield counts
    finally:
        for cls, orig in saved:
            setattr(cls, "forward", orig)  # noqa: B010


def _step(fn: Callable[[], Any], train: bool, sync: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    out = fn()
    if train:
        out.loss.backward()
    sync()
    return (time.perf_counter() - t0) * 1000


def run_pass(lm: Any, ids: Any, name: str, backend: str, gdn_class: str | None,
             wrap: fla_dispatch.CompileWrap | None, fused: FusedCalls | None = None) -> CompiledPass:
    """One pass: explain (breaks), eager steps, compiled steps with the parts counted, and with `fused` the fused
    functions' calls (the positive control: verify/compiled_calls.py)."""
    import torch

    train = name == "train"
    lm.train(train)
    sync = torch.cuda.synchronize if ids.is_cuda else (lambda: None)
    kwargs = {"input_ids": ids, "use_cache": False, **({"labels": ids} if train else {})}
    grad = torch.enable_grad() if train else torch.no_grad()
    parts = _parts(lm, gdn_class)
    with grad:
        torch._dynamo.reset()
        try:
            ex = torch._dynamo.explain(lm)(**kwargs)
        except Exception as exc:  # noqa: BLE001 - Dynamo's error is the answer
            return CompiledPass(name, 0, [], [], None, None, None, f"{type(exc).__name__}: {str(exc)[:400]}")
        fused = fused or FusedCalls(None, {}, ())
        with counting(parts) as eager_counts, fused.counting(compiled=False) as eager_ops:
            eager = [_step(lambda: lm(**kwargs), train, sync) for _ in range(STEPS + 1)][1:]
        calls = {p: c[0] // (STEPS + 1) for p, c in eager_counts.items()}
        torch._dynamo.reset()
        with counting(parts) as counts, fused.counting(compiled=True) as compiled_ops:
            compiled = torch.compile(lm, backend=backend)
            try:
                t0 = time.perf_counter()
                _step(lambda: compiled(**kwargs), train, sync)  # type: ignore[no-untyped-call]  # torch.compile's result
                compile_s = round(time.perf_counter() - t0, 2)
                for c in counts.values():
                    c[0] = 0
                timed = [_step(lambda: compiled(**kwargs), train, sync)  # type: ignore[no-untyped-call]  # as above
                         for _ in range(STEPS)]
            except Exception as exc:  # noqa: BLE001
                return CompiledPass(name, ex.graph_count, breaks_of(ex, wrap), [], None, None, None,
                                    f"{type(exc).__name__}: {str(exc)[:400]}")
        torch._dynamo.reset()
    runs = [PartRun(p, cls.__name__, calls.get(p, 0), counts[p][0] // STEPS) for p, cls in parts]
    return CompiledPass(name, ex.graph_count, breaks_of(ex, wrap), runs, round(min(eager), 2), round(min(timed), 2),
                        compile_s, ops=FusedCalls.report(eager_ops, compiled_ops, STEPS + 1))


def run(built: Any, gdn_class: str | None, functions: tuple[str, ...], modes: tuple[str, ...] = ("infer", "train"),
        tokens: int | None = None, fused: FusedCalls | None = None) -> CompiledSection:
    """verify --compile on a model verify built (verify/layers.BuiltModel); `fused`: the bound functions to count."""
    import torch

    lm = built.model
    device = str(built.device)
    backend = "inductor" if device.startswith("cuda") else "aot_eager"
    n = tokens or TOKENS.get(built.shape, 64)
    torch.manual_seed(0)
    vocab = int(getattr(lm.config, "vocab_size", 128))
    ids = torch.randint(0, vocab, (1, n), device=device)
    wrap = fla_dispatch.compile_wrap(functions)
    passes = [run_pass(lm, ids, m if m == "train" else "infer", backend, gdn_class, wrap, fused) for m in modes]
    return CompiledSection(backend, built.shape, device, str(built.dtype), n, passes)


def findings(section: CompiledSection, query: str, static: Finding | None = None) -> list[Finding]:
    """What the compiled run means for a job that compiles the model; `static`: doctor's
    compile-graph-breaks-static finding in the same report, set against what the compiled run measured."""
    out: list[Finding] = []
    for p in section.passes:
        out.extend(_control(p, static))
        if p.error:
            out.append(Finding("compile-failed", Severity.BROKEN,
                               f"torch.compile ({section.backend}) of the {p.name} pass raised: {p.error}",
                               "run the job without torch.compile, or compile each decoder layer instead "
                               "(layer.compile())", "torch._dynamo"))
            continue
        eager = [x for x in p.parts if x.part in ("decoder-loop", "gdn-layer") and x.calls and not x.compiled]
        if eager:
            where = "; ".join(f"{x.part} {x.cls} ({x.eager_calls} of {x.calls} calls)" for x in eager)
            fix = next((b.fix for b in p.breaks if b.fix), None)
            out.append(Finding(
                "compile-runs-eager", Severity.FALLBACK,
                f"under torch.compile the {p.name} pass runs parts of the model eagerly: {where}; {p.break_count} "
                "graph break(s) (see compiled). A job that compiles the model gets less than it thinks, silently.",
                fix, "torch._dynamo.explain; axolotl#3734 (a break in the decoder loop skips the text-model frame)"))
        elif p.break_count:
            out.append(Finding(
                "compile-graph-breaks", Severity.WARNING,
                f"under torch.compile the {p.name} pass has {p.break_count} graph break(s) ({p.graphs} graphs); the "
                "decoder loop and the GDN layers still run compiled.", next((b.fix for b in p.breaks if b.fix), None)))
        else:
            out.append(Finding("compile-ok", Severity.INFO,
                               f"under torch.compile the {p.name} pass runs as {p.graphs} graph(s) with no graph break "
                               f"({section.shape} shape, backend {section.backend})."))
    return out


def _control(p: CompiledPass, static: Finding | None) -> list[Finding]:
    """The positive control of one pass: a fused function the pass calls whose fast implementation the compiled run
    never reached (`compile-op-not-exercised`: its graph breaks decide nothing about it), and one it reached with no
    graph break where doctor's static reading says every call breaks (`compile-static-contradicted`: both shown)."""
    out: list[Finding] = []
    if p.error:
        return out
    for o in p.ops:
        if not o.calls:
            continue
        said = (f"doctor's static reading says every call of {o.function} breaks the graph" if static is not None
                and o.function in static.functions else None)
        if not o.exercised:
            why = ("its fast implementation " + str(o.fast) + " was never reached" if o.fast else
                   "no fast implementation is bound here, so transformers ran its torch reference")
            out.append(Finding(
                "compile-op-not-exercised", Severity.FALLBACK,
                f"the compiled {p.name} pass did not exercise {o.function} ({o.calls} call(s) per step; {why}): its "
                f"{p.break_count} graph break(s) say nothing about how torch.compile treats {o.function}"
                + (f", and {said}: neither confirmed nor contradicted here" if said else "") + ".",
                "rerun verify --compile where the package is installed and bound (kernelcheck install --model M)",
                None, (o.function,)))
        elif said and p.break_count == 0:
            how = (f"ran {o.runs} time(s) as an opaque call (torch.compiler.disable: eager inside the graph)"
                   if o.compiler_disabled and o.runs else f"was traced into the graph {o.traced} time(s)")
            out.append(Finding(
                "compile-static-contradicted", Severity.INFO,
                f"{said}; the compiled {p.name} pass reached {o.fast} and {how}, with 0 graph breaks: "
                "the measurement here, not the static reading, is what this torch does.",
                None, "measured: verify --compile (fused-op counts and torch._dynamo.explain)", (o.function,)))
    return out
