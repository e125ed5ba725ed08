"""verify --compile's section (verify/compiled.py writes it): the model's real layers under torch.compile, per pass -
the graph breaks with where and why (torch._dynamo.explain), which parts ran compiled and which ran eagerly, compiled
vs eager time, and the fix for each break where one exists. Values here; `lines` writes the text (tested once, in
tests/unit/test_compiled.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelcheck.core.fix import Fix


@dataclass(frozen=True)
class GraphBreak:
    """One distinct graph break: Dynamo's reason, its explanation, the innermost frame and the nearest frame in the
    model's modeling code, how often it was hit in one forward, and the fix where one exists."""

    reason: str
    explanation: str | None
    where: str  # "path:line in function" (path after site-packages/)
    model_frame: str | None
    count: int
    fix: Fix | str | None = None  # a Fix once built

    def __post_init__(self) -> None:
        object.__setattr__(self, "fix", Fix.of(self.fix))

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "explanation": self.explanation, "where": self.where,
                "model_frame": self.model_frame, "count": self.count, "fix": self.fix}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GraphBreak:
        return cls(d["reason"], d["explanation"], d["where"], d["model_frame"], d["count"], d["fix"])


@dataclass(frozen=True)
class PartRun:
    """One part of the model (the whole model, the decoder loop, the decoder layers, the GDN layers): its class, the
    calls per step, and how many of those ran eagerly under torch.compile (0: compiled, or inlined into a compiled
    frame)."""

    part: str  # model | decoder-loop | decoder-layer | gdn-layer
    cls: str
    calls: int
    eager_calls: int

    @property
    def compiled(self) -> bool:
        return self.calls > 0 and self.eager_calls == 0

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "class": self.cls, "calls": self.calls, "eager_calls": self.eager_calls,
                "compiled": self.compiled}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PartRun:
        return cls(d["part"], d["class"], d["calls"], d["eager_calls"])


@dataclass(frozen=True)
class OpCalls:
    """verify --compile's positive control for one fused function (verify/compiled_calls.py): its fast
    implementation (None: transformers bound the torch reference), whether that carries torch.compiler.disable, the
    function's calls per eager step, and in the compiled run the fast implementation's trace-time visits and Python
    runs."""

    function: str
    fast: str | None
    compiler_disabled: bool
    calls: int
    traced: int
    runs: int

    @property
    def exercised(self) -> bool:
        """The compiled run reached the fast implementation (traced into a frame, or ran)."""
        return self.traced + self.runs > 0

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "fast": self.fast, "compiler_disabled": self.compiler_disabled,
                "calls": self.calls, "traced": self.traced, "runs": self.runs, "exercised": self.exercised}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OpCalls:
        return cls(d["function"], d["fast"], d["compiler_disabled"], d["calls"], d["traced"], d["runs"])


@dataclass(frozen=True)
class CompiledPass:
    """One pass (infer: a forward without grad; train: forward + backward) compiled and eager."""

    name: str  # infer | train
    graphs: int
    breaks: list[GraphBreak]
    parts: list[PartRun]
    eager_ms: float | None
    compiled_ms: float | None
    compile_s: float | None
    error: str | None = None  # torch.compile raised: what
    ops: list[OpCalls] = field(default_factory=list)  # the fused functions reached (or not) by the compiled run

    @property
    def break_count(self) -> int:
        return sum(b.count for b in self.breaks)

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.name, "graphs": self.graphs, "graph_breaks": self.break_count,
                "breaks": [b.to_json() for b in self.breaks], "parts": [p.to_json() for p in self.parts],
                "eager_ms": self.eager_ms, "compiled_ms": self.compiled_ms, "compile_s": self.compile_s,
                "error": self.error, "fused_ops": [o.to_json() for o in self.ops]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CompiledPass:
        return cls(d["pass"], d["graphs"], [GraphBreak.from_json(b) for b in d["breaks"]],
                   [PartRun.from_json(p) for p in d["parts"]], d["eager_ms"], d["compiled_ms"], d["compile_s"],
                   d["error"], [OpCalls.from_json(o) for o in d.get("fused_ops", [])])


@dataclass(frozen=True)
class CompiledSection:
    """verify --compile: how it compiled (backend), what (shape, device, dtype, tokens) and each pass."""

    backend: str
    shape: str
    device: str
    dtype: str
    tokens: int
    passes: list[CompiledPass] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "shape": self.shape, "device": self.device, "dtype": self.dtype,
                "tokens": self.tokens, "passes": [p.to_json() for p in self.passes]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CompiledSection:
        return cls(d["backend"], d["shape"], d["device"], d["dtype"], d["tokens"],
                   [CompiledPass.from_json(p) for p in d["passes"]])

    @property
    def lines(self) -> list[str]:
        out = [f"torch.compile (backend {self.backend}), {self.shape} shape on {self.device} ({self.dtype}), "
               f"{self.tokens} tokens"]
        for p in self.passes:
            if p.error:
                out.append(f"{p.name}: torch.compile failed: {p.error}")
                continue
            speed = (f"; compiled {p.compiled_ms} ms vs eager {p.eager_ms} ms per step (compile {p.compile_s} s)"
                     if p.compiled_ms is not None else "")
            out.append(f"{p.name}: {p.graphs} graph(s), {p.break_count} graph break(s){speed}")
            for part in p.parts:
                state = ("compiled" if part.compiled else
                         f"ran eagerly ({part.eager_calls} of {part.calls} calls)" if part.calls else "not called")
                out.append(f"  {part.part} ({part.cls}): {state}")
            for o in p.ops:
                if not o.calls:
                    continue
                out.append(f"  {o.function} ({o.calls} call(s) per step): " + (
                    f"fast implementation reached {o.traced}x while tracing, ran {o.runs}x"
                    + (" (torch.compiler.disable: run eagerly)" if o.compiler_disabled else "")
                    if o.exercised else "NOT exercised by the compiled run ("
                    + ("its fast implementation was never reached)" if o.fast else
                       "no fast implementation bound: the torch reference ran)")))
            for b in p.breaks:
                out.append(f"  break x{b.count}: {b.reason} at {b.where}"
                           + (f" (from {b.model_frame})" if b.model_frame and b.model_frame != b.where else ""))
                if b.explanation:
                    out.append(f"    why: {b.explanation}")
                if b.fix:
                    out.append(f"    fix: {b.fix}")
        return out
