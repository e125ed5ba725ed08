"""What doctor reads from the modeling source beyond the bindings (transformers 5.25+ patterns).

- `decode_in_prefill`: decode-phase functions the chunked (prefill / training) path also calls, so doctor
  does not call them "not used in this mode" in train mode;
- `source_findings`: one info finding for that, one for the Hub hooks `kernelize` can replace as a whole
  (`causal_conv1d_forward`), and a warning for any `use_kernel*` decorator the reader does not understand.
The source layout is read in kernelcheck/integrations/transformers_calls.py only.
"""

from __future__ import annotations

import logging

from kernelcheck.core import environment, matrix
from kernelcheck.core.status import Finding, Mode, Severity
from kernelcheck.integrations import transformers_calls

logger = logging.getLogger(__name__)


def _decode_functions(m: matrix.Matrix) -> dict[str, str]:
    """registered name -> kernelcheck function, for every decode-phase function (misnamed registrations too)."""
    out = {fn: fn for fn, info in m.functions.items() if info.phase == "decode"}
    for e in m.transformers.get("misnamed", []):
        if e["function"] in out:
            out[e["registered"]] = e["function"]
    return out


def decode_in_prefill(module: str, m: matrix.Matrix) -> dict[str, transformers_calls.OutsideDecode]:
    """{kernelcheck function: its first call outside single-token decode} in modeling module `module`."""
    names = _decode_functions(m)
    out: dict[str, transformers_calls.OutsideDecode] = {}
    for c in transformers_calls.decode_calls_outside_decode(module, set(names)):
        out.setdefault(names[c.registered], c)
    return out


def source_findings(module: str, env: environment.Environment, mode: str, m: matrix.Matrix) -> list[Finding]:
    out: list[Finding] = []
    tv = env.transformers
    if mode == Mode.TRAIN:
        calls = decode_in_prefill(module, m)
        if calls:
            parts = [f"{fn} ({c.attribute}, called in {c.caller}, line {c.line}"
                     + (": for the last tokens when the cache keeps intermediate recurrent states, "
                        "cache.get_recurrent_states_to_keep(), set by Cache.activate_past_recording" if c.recording
                        else "") + ")" for fn, c in calls.items()]
            out.append(Finding(
                "decode-function-in-prefill", Severity.INFO,
                f"transformers {tv} also calls a decode function outside single-token decode: " + "; ".join(parts)
                + ". It runs in a training or prefill forward that passes such a cache (assisted or speculative "
                "generation inside the job, RL rollouts), so doctor counts it as used in train mode.",
                None, f"the installed {module} source", functions=tuple(calls)))
    hooks = transformers_calls.hooks(module)
    out += hook_findings(module, tv, hooks, m)
    return out


def hook_findings(module: str, tv: str | None, hooks: transformers_calls.Hooks, m: matrix.Matrix) -> list[Finding]:
    """kernelize hooks around functions kernelcheck checks (info), decorators it cannot read (warning)."""
    out: list[Finding] = []
    known = set(m.functions)
    relevant = [h for h in hooks.forward_functions if set(h[3]) & known or h[0] in known]
    for h in hooks.forward_functions:
        if h not in relevant:
            logger.info("%s: Hub hook %s (line %d) wraps no function kernelcheck checks", module, h[0], h[2])
    if relevant:
        out.append(_hooks_finding(module, tv, relevant, hooks.kernelized, m))
    if hooks.unread:
        out.append(Finding(
            "kernel-decorator-unread", Severity.WARNING,
            f"transformers {tv}'s {module} uses kernel decorators kernelcheck does not understand: "
            + "; ".join(map(str, hooks.unread)) + ". What they bind is not in this report.",
            "check the job itself with kernelcheck verify --model M; report it to kernelcheck",
            f"the installed {module} source", decorators=tuple(dict.fromkeys(u.decorator for u in hooks.unread))))
    return out


def _hooks_finding(module: str, tv: str | None, relevant: list[tuple[str, str, int, tuple[str, ...]]],
                   kernelized: tuple[tuple[str, tuple[str, ...], int], ...], m: matrix.Matrix) -> Finding:
    from kernelcheck.integrations.transformers_hub import transformers_hub  # reads transformers' source: no import

    th = transformers_hub(m=m)
    mapped = {e.name: e for e in th.mapping}
    parts = []
    for fn, layer, line, called in relevant:
        owners = [cls for cls, names, _ in kernelized if fn in names]
        where = f"attached to {', '.join(owners)} by use_kernelized_func" if owners else "attached to no layer"
        entry = mapped.get(layer)
        body = f"its own body runs and calls {', '.join(called)} (checked above)" if called else "its own body runs"
        hub = (f"transformers maps '{layer}' to {entry.repo} (the hub section says whether it loads); where it "
               f"does not, {body}" if entry else f"transformers' Hub mapping has no kernel for it, so {body}")
        parts.append(f"{fn} (@use_kernel_forward_from_hub('{layer}'), line {line}, {where}): {hub}")
    return Finding(
        "kernelize-hooks", Severity.INFO,
        f"transformers {tv}'s {module.rsplit('.', 1)[-1]} declares functions that `kernelize` (use_kernels=True, "
        "or a runtime that kernelizes the model with its own kernel mapping) can replace as a whole: "
        + "; ".join(parts) + ". A mapping the job registers itself is not visible to doctor.",
        None, f"the installed {module} source")
