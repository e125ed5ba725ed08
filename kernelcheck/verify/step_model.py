"""The shortened model of `verify --step`: real widths, one full period of the layer pattern.

A 64-layer Qwen3.8-27B is 16 repeats of (3 Gated DeltaNet + 1 full attention). The step model keeps
the real config (widths, heads, vocabulary and LM head: on the full shape nothing is shrunk) and cuts
`layer_types` to the first N entries of the real list, N = one period by default (`--layers N` to
choose). On the tiny shape the widths come from matrix/verify.toml's field table, the pattern stays.

Each decoder layer is wrapped in profiler ranges `kernelcheck::layer::<type>::L<i>` (forward) and
`...::backward` (opened when the gradient reaches the layer's output, closed when it leaves its input,
by identity autograd nodes), so the trace says what each layer type cost in the whole step.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelcheck.core.errors import BadInput, KernelcheckError
from kernelcheck.core.models import ResolvedModel
from kernelcheck.verify import layers as layers_mod

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

log = logging.getLogger(__name__)

LAYER_PREFIX = "kernelcheck::layer::"
PHASE_PREFIX = "kernelcheck::phase::"


def period(types: list[str]) -> int:
    """Length of the shortest prefix that, repeated, gives `types` (4 for 3 GDN + 1 attention)."""
    n = len(types)
    for p in range(1, n + 1):
        if all(types[i] == types[i % p] for i in range(n)):
            return p
    return n


@dataclass(frozen=True)
class StepShape:
    """What the step model keeps of the real model."""

    built_types: tuple[str, ...]  # layer type of each built layer
    full_types: dict[str, int]  # layer type -> count in the real model
    full_layers: int
    period: int

    def built_counts(self) -> dict[str, int]:
        return dict(Counter(self.built_types))


def step_config(model: ResolvedModel, shape: str, layers: int | None, *, m: Matrix) -> tuple[Any, StepShape]:
    """The transformers config of the step model and what it keeps."""
    from transformers import AutoConfig

    mt, fields = layers_mod.text_config(model)
    cfg0, overrides = layers_mod.shaped_config(model, shape, m=m)
    if shape == "full":
        overrides = {}  # real widths AND the real vocabulary and head
    real = AutoConfig.for_model(mt, **fields)
    real = getattr(real, "text_config", None) or real
    n_full = int(getattr(real, "num_hidden_layers", 0) or 0)
    types = list(getattr(real, "layer_types", None) or []) or ["decoder"] * max(1, n_full)
    per = period(types)
    n = per if layers is None else layers
    if n < 1:
        raise BadInput(f"--layers must be at least 1, not {n}.")
    if n > len(types):
        raise BadInput(f"--layers {n}: {model.query} has only {len(types)} layers.")
    built = types[:n]
    missing = sorted(set(types) - set(built))
    if missing:
        log.info("step model of %d layers lacks layer types %s", n, missing)
    over = {k: v for k, v in overrides.items() if k not in ("layer_types", "num_hidden_layers")}
    over["num_hidden_layers"] = n
    if getattr(real, "layer_types", None):
        over["layer_types"] = built
    mt_built = getattr(cfg0, "model_type", mt)
    try:
        sub_fields = real.to_dict() if real is not None else fields
        sub_fields = {k: v for k, v in sub_fields.items() if k not in layers_mod._DROP}
        cfg = AutoConfig.for_model(mt_built, **{**sub_fields, **over})
    except Exception as exc:  # noqa: BLE001
        raise KernelcheckError(f"could not build the {n}-layer step config of `{mt_built}` ({type(exc).__name__}: "
                               f"{exc}).") from None
    return cfg, StepShape(tuple(built), dict(Counter(types)), len(types), per)


def build(cfg: Any, device: str, dtype_name: str, checkpointing: bool, attn: str | None) -> Any:
    """The causal LM with random weights (seeded), on `device`, gradient checkpointing as asked."""
    import torch
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype_name)}
    if attn:
        kwargs["attn_implementation"] = attn
    torch.manual_seed(0)
    with torch.device(device):
        lm = AutoModelForCausalLM.from_config(cfg, **kwargs)  # type: ignore[no-untyped-call]  # transformers: unannotated
    lm.to(device)
    if checkpointing:
        lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return lm


class LayerRanges:
    """Forward and backward profiler ranges around each decoder layer (see the module docstring)."""

    def __init__(self, lm: Any, types: tuple[str, ...]):
        import torch

        self.torch = torch
        self.open: dict[str, Any] = {}
        self.handles: list[Any] = []
        self.fwd: dict[int, Any] = {}
        opener, closer = self._marks()
        self._opener, self._closer = opener, closer
        for i, layer in enumerate(layers_mod._decoder_layers(lm)):
            name = f"{LAYER_PREFIX}{types[i] if i < len(types) else 'decoder'}::L{i}"
            self.handles.append(layer.register_forward_pre_hook(self._pre(i, name), with_kwargs=True))
            self.handles.append(layer.register_forward_hook(self._post(i, name)))

    def _marks(self) -> tuple[Any, Any]:
        """Two identity autograd functions whose backward opens / closes the layer's backward range."""
        import torch

        def mark(on_backward: Callable[[str], None]) -> Any:
            class Mark(torch.autograd.Function):
                @staticmethod
                def forward(ctx: Any, name: str, x: torch.Tensor) -> torch.Tensor:
                    ctx.name = name
                    return x.view_as(x)

                @staticmethod
                def backward(ctx: Any, g: torch.Tensor) -> tuple[None, torch.Tensor]:
                    on_backward(ctx.name + "::backward")
                    return None, g

            return Mark

        return mark(self._enter), mark(self._exit)

    def _enter(self, name: str) -> None:
        if name not in self.open:
            rf = self.torch.profiler.record_function(name)
            rf.__enter__()  # type: ignore[no-untyped-call]  # torch's record_function.__enter__ is unannotated
            self.open[name] = rf

    def _exit(self, name: str) -> None:
        rf = self.open.pop(name, None)
        if rf is not None:
            rf.__exit__(None, None, None)

    def _recomputing(self) -> bool:
        """Inside a backward pass: activation checkpointing recomputing the layer's forward. No range of its own:
        its cost belongs to the layer's backward range, which holds it; and a non-reentrant checkpoint stops the
        recompute as soon as the saved tensors are back, so the forward hook would never close a range opened
        here (it stayed open to the end of the step and the next step's forward had none)."""
        return bool(self.torch._C._current_graph_task_id() != -1)

    def _pre(self, i: int, name: str) -> Any:
        def hook(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if self._recomputing():
                return None  # the backward range holds it (see _recomputing)
            self._enter(name)
            grad = self.torch.is_grad_enabled()
            if args and isinstance(args[0], self.torch.Tensor) and grad and args[0].requires_grad:
                return (self._closer.apply(name, args[0]), *args[1:]), kwargs
            hs = kwargs.get("hidden_states")
            if isinstance(hs, self.torch.Tensor) and grad and hs.requires_grad:
                return args, {**kwargs, "hidden_states": self._closer.apply(name, hs)}
            return None

        return hook

    def _post(self, i: int, name: str) -> Any:
        def hook(_m: Any, _args: tuple[Any, ...], out: Any) -> Any:
            if self._recomputing():
                return None
            self._exit(name)
            t = out[0] if isinstance(out, tuple) else out
            if not (isinstance(t, self.torch.Tensor) and self.torch.is_grad_enabled() and t.requires_grad):
                return None
            t = self._opener.apply(name, t)
            return (t, *out[1:]) if isinstance(out, tuple) else t

        return hook

    def close_all(self) -> None:
        for name in list(self.open):
            self._exit(name)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def parameters_by_type(lm: Any, types: tuple[str, ...]) -> tuple[dict[str, float], int]:
    """(mean parameters per layer of each type, parameters outside the decoder layers)."""
    layers = layers_mod._decoder_layers(lm)
    per: dict[str, list[int]] = {}
    inside = 0
    for i, layer in enumerate(layers):
        n = sum(p.numel() for p in layer.parameters())
        inside += n
        per.setdefault(types[i] if i < len(types) else "decoder", []).append(n)
    total = sum(p.numel() for p in lm.parameters())
    return {t: sum(v) / len(v) for t, v in per.items()}, total - inside
