"""What a live run showed for one function, as values: the evidence block (`LiveEvidence`), the error a call raised
(`RunError`) and the call on the captured inputs against the torch reference (`DirectComparison`).

verify/statuses.py builds them and decides broken-or-not from their fields; `to_json` is the block printed under
the function (a FunctionStatus's `evidence`), key for key as verify has always printed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DirectComparison:
    """A function called twice on its first prefill call's inputs: the bound path and the torch reference.
    Not compared: `why` (nothing to compare) or `error` (the bound path raised); compared: the errors and `ok`."""

    compared: bool
    why: str | None = None
    error: str | None = None
    rel_err: float | None = None
    max_abs_err: float | None = None
    tolerance: float | None = None
    nonfinite: bool = False
    ok: bool | None = None  # None: within the tolerance, but the controls say this comparison cannot decide
    negative_rel_err: float | None = None  # the reference called again on the same inputs
    positive_rel_err: float | None = None  # the reference with `perturbed` scaled (a fault the check must see)
    perturbed: str | None = None
    decided: bool | None = None  # the positive control beyond the tolerance and the negative one by the margin

    def to_json(self) -> dict[str, Any]:
        if not self.compared:
            return {"compared": False, **({"why": self.why} if self.why is not None else {}),
                    **({"error": self.error} if self.error is not None else {})}
        out: dict[str, Any] = {"compared": True, "rel_err": self.rel_err, "max_abs_err": self.max_abs_err,
               "tolerance": self.tolerance, "nonfinite": self.nonfinite, "ok": self.ok}
        if self.decided is not None:
            out["controls"] = {"negative_rel_err": self.negative_rel_err, "positive_rel_err": self.positive_rel_err,
                               "perturbed": self.perturbed, "decided": self.decided}
        return out


@dataclass(frozen=True)
class RunError:
    """A call of the function that raised: in which pass (forward, backward, output, comparison) of which step."""

    phase: str
    step: str
    exception: str
    implementation: str

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "step": self.step, "exception": self.exception,
                "implementation": self.implementation}


@dataclass(frozen=True)
class LiveEvidence:
    """The evidence block of one function: what ran (`path` fast or torch), how often, what it launched per layer
    and pass, and what went wrong or was compared. `inline_note`: the old regime's layer ran its own torch code (no
    function was stored, so only that is known)."""

    device: str
    path: str
    calls: int
    implementation_called: str | list[str]
    inline_note: str | None = None
    calls_by_step: dict[str, int] = field(default_factory=dict)
    cpu_ops: int = 0
    gpu_kernels: int = 0
    backward_cpu_ops: int = 0
    backward_gpu_kernels: int = 0
    cpu_ms: float = 0.0
    gpu_ms: float = 0.0
    kernel_names: list[str] = field(default_factory=list)
    fast_kernels_seen: list[str] = field(default_factory=list)
    per_layer: list[dict[str, Any]] = field(default_factory=list)
    backends: dict[str, list[str]] | None = None  # fla: the backends each pass ran
    forced_torch: str | None = None
    nonfinite_output: bool = False
    error: RunError | None = None
    vs_reference: DirectComparison | None = None
    alone_on_fast_path_vs_reference: dict[str, Any] | None = None  # verify/compare.py `isolate`

    def to_json(self) -> dict[str, Any]:
        if self.inline_note is not None:
            return {"device": self.device, "path": self.path, "calls": self.calls,
                    "implementation_called": self.implementation_called, "note": self.inline_note}
        out: dict[str, Any] = {
            "device": self.device, "implementation_called": self.implementation_called, "path": self.path,
            "calls": self.calls, "calls_by_step": self.calls_by_step, "cpu_ops": self.cpu_ops,
            "gpu_kernels": self.gpu_kernels, "backward_cpu_ops": self.backward_cpu_ops,
            "backward_gpu_kernels": self.backward_gpu_kernels, "cpu_ms": self.cpu_ms, "gpu_ms": self.gpu_ms,
            "kernel_names": self.kernel_names, "fast_kernels_seen": self.fast_kernels_seen,
            "per_layer": self.per_layer}
        if self.backends is not None:
            out["backends"] = self.backends
        if self.forced_torch is not None:
            out["forced_torch"] = self.forced_torch
        if self.nonfinite_output:
            out["nonfinite_output"] = True
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.vs_reference is not None:
            out["vs_reference"] = self.vs_reference.to_json()
        if self.alone_on_fast_path_vs_reference is not None:
            out["alone_on_fast_path_vs_reference"] = self.alone_on_fast_path_vs_reference
        return out
