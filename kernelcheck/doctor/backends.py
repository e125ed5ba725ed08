"""doctor's fla backend section: for each fla op the model uses and transformers binds, the backend fla's own
dispatch will run (Triton / TileLang / FlashQLA / FlashKDA) and why (integrations/fla_dispatch.py decides).

What fails because of a backend (fla#640 on the Triton backward, TileLang's JIT without a CUDA toolkit) is a
breakage rule (matrix/breakages.toml `fla_backend`), decided with the rest of the rules; this module only reports
the choice, and says so when fla's dispatch code does not read as a layout kernelcheck knows."""

from __future__ import annotations

from kernelcheck.core import matrix
from kernelcheck.core.device import Device
from kernelcheck.core.environment import Environment
from kernelcheck.core.status import Finding, FunctionStatus, Mode, Severity, Status
from kernelcheck.integrations import fla_dispatch
from kernelcheck.report.sections import BackendsSection


def fla_functions(functions: list[FunctionStatus], mode: str, m: matrix.Matrix) -> tuple[str, ...]:
    """The fla ops the job calls on fla (bound to fla, used in this mode; `unsupported` is bound but judged for a
    GPU that is not this machine's, as with --arch)."""
    fla = m.packages["fla"].distributions  # fla-core, flash-linear-attention
    return tuple(fs.name for fs in functions if fs.package in fla
                 and fs.status in (Status.FAST, Status.UNSUPPORTED, Status.BROKEN) and fs.used)


def section(env: Environment, device: Device, functions: list[FunctionStatus], mode: str,
            m: matrix.Matrix) -> tuple[BackendsSection | None, list[Finding]]:
    """The `backends` report section and its findings, for the verdict's `device`: (None, []) where no fla op runs
    on it, or where its GPU is neither here nor named (the backend depends on its capability)."""
    fns = fla_functions(functions, mode, m)
    if not fns or device.type != "cuda" or not env.gpus:
        return None, []
    lay = fla_dispatch.layout(env, m=m)
    ops = [op for op in fla_dispatch.decide(lay, env, fns) if mode == Mode.TRAIN or op.phase == "forward"]
    findings: list[Finding] = []
    if not lay.known:
        findings.append(Finding(
            "fla-dispatch-unknown", Severity.WARNING,
            f"fla-core {lay.version}'s backend dispatch does not read as any layout kernelcheck knows "
            f"({'; '.join(lay.problems)}): which backend runs {', '.join(fns)} is not known, so the rules that "
            "depend on it are reported as 'may apply'.",
            "kernelcheck verify --model M --mode train  (shows the kernels that really ran)", lay.reference))
    for fn in fns:
        mine = [op for op in ops if op.function == fn]
        if not mine:
            continue
        text = "; ".join(f"{op.phase} {fla_dispatch.BACKEND_NAMES.get(op.backend, op.backend)}: {op.reason}"
                         for op in mine)
        sm = env.capabilities[0].sm if env.capabilities else "sm_?"
        where = f"{sm}, a GPU that is not on this machine" if device.predicted else sm
        findings.append(Finding("fla-backend", Severity.INFO, f"{fn} on {where}: {text}.",
                                None, lay.reference, (fn,)))
    data = BackendsSection(lay.version, lay.origin, lay.reference, env.nvcc, env.nvcc_path, env.nvcc_source,
                           {k: v for k, v in env.env_vars.items() if k in fla_dispatch.SWITCHES}, tuple(ops))
    return data, findings
