"""verify --compile's positive control: did the compiled run reach the fused ops at all?

"0 graph breaks" says nothing about an op the compiled run never called (its package absent, transformers bound its
torch reference). For each function the model binds, the callables transformers' hub-kernel wrapper picks from
(its closure cells `implementation` and `torch_function`, the same cells verify/instrument.py records) are wrapped,
for the eager steps and the compiled run, by a counter:
- `calls` (eager steps): calls of the function, any implementation: what one step of the pass calls;
- `traced` (compiled run): times Dynamo reached the fast implementation while tracing a compiled frame, counted at
  trace time by a `torch.compiler.assume_constant_result` function (it runs while Dynamo traces and leaves a constant
  in the graph: no side effect, no break of its own);
- `runs` (compiled run): calls of the fast implementation that ran as Python: from a frame Dynamo did not compile,
  or, where the implementation carries `torch.compiler.disable`, each call (the counter is then disabled too, the
  same semantics as the op it wraps).
An op with `calls` but neither `traced` nor `runs` was not exercised by the compiled run: its graph breaks, 0 or not,
neither confirm nor contradict doctor's static reading of it (`compile-op-not-exercised`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kernelcheck.report.compiled import OpCalls
from kernelcheck.verify.instrument import closure_cells, dotted


def compiler_disabled(fn: Any) -> bool:
    """Whether `fn` carries torch.compiler.disable (torch marks the wrapper it returns; feature-detected)."""
    return bool(getattr(fn, "_torchdynamo_disable", False))


@dataclass
class _Count:
    fast: str | None  # the fast implementation's dotted name (None: transformers bound the torch reference)
    disabled: bool
    calls: int = 0
    traced: int = 0
    runs: int = 0


class FusedCalls:
    """The fused functions of one bound modeling module (decorator regime: transformers' hub-kernel wrapper at a
    module attribute), counted while `counting` is open."""

    def __init__(self, module: Any, bindings: dict[str, Any], functions: tuple[str, ...]):
        self.cells: dict[str, dict[str, Any]] = {}
        for fn in functions:
            b = bindings.get(fn)
            attr = (getattr(b, "extra", None) or {}).get("attribute", "") if b is not None else ""
            orig = getattr(module, attr, None) if attr else None
            cells = closure_cells(orig) if orig is not None else {}
            if cells:
                self.cells[fn] = cells

    @contextmanager
    def counting(self, compiled: bool) -> Iterator[dict[str, _Count]]:
        """Count each function's calls (eager steps, `compiled` False) or its fast implementation's (compiled run)."""
        import torch

        counts: dict[str, _Count] = {}
        restore: list[tuple[Any, Any]] = []
        for fn, cells in self.cells.items():
            impl, ref = (_content(cells["implementation"]), _content(cells["torch_function"]))
            fast = impl if impl is not None and impl is not ref else None
            c = counts[fn] = _Count(dotted(fast) if fast is not None else None, compiler_disabled(fast))
            for name, real in (("implementation", impl), ("torch_function", ref)):
                if real is None or (compiled and (name != "implementation" or fast is None)):
                    continue  # the eager steps count either callable; the compiled run the fast one only
                restore.append((cells[name], real))
                cells[name].cell_contents = _counter(torch, real, c, compiled)
        try:
            yield counts
        finally:
            for cell, real in restore:
                cell.cell_contents = real

    @staticmethod
    def report(eager: dict[str, _Count], compiled: dict[str, _Count], steps: int) -> list[OpCalls]:
        """Per function: its calls per eager step and what the compiled run did with its fast implementation."""
        return [OpCalls(fn, c.fast, c.disabled, e.calls // max(1, steps), c.traced, c.runs)
                for fn, e in eager.items() if (c := compiled.get(fn)) is not None]


def _content(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _counter(torch: Any, real: Callable[..., Any], c: _Count, compiled: bool) -> Callable[..., Any]:
    """`real` counted: eager steps count every call; the compiled run counts trace-time visits and Python runs."""
    if not compiled:
        def eager(*args: Any, **kwargs: Any) -> Any:
            c.calls += 1
            return real(*args, **kwargs)

        return eager

    def visit() -> int:  # runs while Dynamo traces: the call was reached inside a compiled frame
        c.traced += 1
        return 0

    seen = torch.compiler.assume_constant_result(visit)

    def ran(*args: Any, **kwargs: Any) -> Any:
        if not torch.compiler.is_compiling():
            c.runs += 1
        return real(*args, **kwargs)

    inner = torch.compiler.disable(ran) if compiler_disabled(real) else ran

    def counted(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            seen()
        return inner(*args, **kwargs)

    return counted
