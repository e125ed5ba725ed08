"""`kernelcheck doctor` (and `kernelcheck.check()`): the static check, assembled once.

doctor/run.py builds the report; this adds what the command adds after it, so the library and the CLI print the
same findings: the GPUs of --arch (`gpu-target`), --live's merged run, the packing section and its findings, and a
FALLBACK's cost in GPU-hours (`fallback-cost`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelcheck.commands.context import Context
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome, reported
from kernelcheck.core.status import Finding, Mode, Severity

if TYPE_CHECKING:
    from kernelcheck.core.environment import Environment
    from kernelcheck.report.model import Report


@dataclass(frozen=True)
class Request:
    """doctor's options. `isolate` None: the CLI's default, import proofs in child processes unless --live;
    `env`: an environment to judge instead of probing this one (tests, other machines)."""

    model: str | None = None
    mode: str = Mode.TRAIN
    live: bool = False
    exact: bool = False
    hub: bool | None = None
    hub_device: str | None = None
    hub_source: str = "auto"
    arch: str | None = None
    packing: str | None = None
    no_cache: bool = False
    isolate: bool | None = None
    env: Environment | None = None
    jit_probe: bool = False  # --jit-probe: each JIT the chosen implementation uses compiles and runs a trivial kernel
    cache_dir: str | None = None  # --cache-dir: the cache proof for a folder `kernelcheck warm` baked


def check(req: Request, ctx: Context) -> None:
    """Every usage rule of doctor, found before anything is probed: --arch with --live, the model, the packing mode
    and a --cache-dir that `kernelcheck warm` did not write."""
    from kernelcheck.commands import usage

    if req.arch is not None and req.live:
        raise BadInput("--live runs the model's layers on this machine's GPU; --arch names GPUs that are not "
                       "here. Use one or the other.")
    usage.mode(req.mode)
    usage.model(req.model, ctx.matrix)
    if req.packing is not None:
        from kernelcheck.packing import decide

        decide.check_mode(req.packing, decide.load_facts(m=ctx.matrix))
    if req.cache_dir is not None:
        from kernelcheck.doctor import cacheproof

        cacheproof.read(req.cache_dir)


def run(req: Request, ctx: Context) -> Outcome[Report]:
    check(req, ctx)  # before the imports below: a usage error is answered at once
    from kernelcheck.doctor import run as doctor_run

    env = req.env
    if req.arch is not None:
        from kernelcheck.core import environment, gpu

        # Packages are probed after binding, as doctor does without --arch.
        env = environment.probe(m=ctx.matrix, packages=False, gpu_override=gpu.parse_arch(req.arch, m=ctx.matrix))
    isolate = not req.live if req.isolate is None else req.isolate
    report = doctor_run.doctor(req.model, req.mode, env=env, exact=req.exact, hub=req.hub, hub_device=req.hub_device,
                               hub_source=req.hub_source, isolate=isolate, m=ctx.matrix, import_cache=not req.no_cache)
    if req.arch is not None and env is not None:
        report.findings.insert(0, Finding(
            "gpu-target", Severity.INFO, "GPUs from --arch "
            + ", ".join(g.capability.sm for g in env.gpus)
            + ", not probed: the verdict is for an image that will run on those GPUs with a driver that "
              "supports this torch's CUDA."))
    if req.cache_dir is not None:  # before --live runs (and compiles) anything
        from kernelcheck.doctor import cacheproof

        cacheproof.attach(report, req.cache_dir, m=ctx.matrix)
    if req.live and req.model:
        from kernelcheck.verify import run as verify_run

        verify_run.merge_into(report, req.model, req.mode, verbose=ctx.verbose, m=ctx.matrix)
    if req.jit_probe:
        from kernelcheck.doctor import jitprobe

        jitprobe.attach(report, m=ctx.matrix, use_cache=not req.no_cache)
    from kernelcheck.packing.findings import attach as attach_packing

    attach_packing(report, req.packing, m=ctx.matrix)
    from kernelcheck.doctor.cost import attach as attach_cost

    attach_cost(report, req.model, m=ctx.matrix)
    return reported(report)
