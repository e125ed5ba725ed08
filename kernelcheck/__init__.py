"""kernelcheck: will the fast kernels of a transformers model really run here? And if not, why, and the fix.

The library's front door: each command's entry point as a function, a thin wrapper over the function the CLI calls
(same arguments, same `Report`, same BadInput for the same bad input: each command's `run` checks its usage first, as
commands/<command>.py `check`). Each imports its command when called, so `import kernelcheck` (and `kernelcheck
--version`) loads nothing else. The names are not the subpackages' (doctor, verify, trace, hub): Python binds
`kernelcheck.doctor` to the subpackage as soon as it is imported.

>>> import kernelcheck
>>> report = kernelcheck.check("qwen3.8-27b", mode="train")    # kernelcheck doctor   # doctest: +SKIP
>>> report.verdict, report.exit_code, [f.id for f in report.findings]                # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcheck.core.version import SCHEMA as SCHEMA  # the package's metadata (core/version.py), for users
from kernelcheck.core.version import __version__

if TYPE_CHECKING:
    import os
    from typing import Any

    from kernelcheck.commands.models import Models
    from kernelcheck.core.models import ResolvedModel
    from kernelcheck.core.plan_step import Step
    from kernelcheck.report.model import Report
    from kernelcheck.trace.analysis import TraceAnalysis

__all__ = ["__version__", "analyze_trace", "applied_kernels", "applied_lines", "check", "models", "plan_install",
           "prefetch_hub_kernels", "resolve_model", "trace_report", "verify_model"]


def __dir__() -> list[str]:
    """dir(kernelcheck): the API and the metadata, not the names the module uses itself (TYPE_CHECKING)."""
    return sorted({*__all__, "SCHEMA", *(k for k in globals() if k.startswith("__") and k != "__dir__")})


def check(model: str | None, mode: str = "train", **options: Any) -> Report:
    """`kernelcheck doctor --model MODEL --mode MODE`: the static check's Report, assembled as the CLI assembles it
    (commands/doctor.py `run`; options are its Request's fields: exact, hub, hub_device, hub_source, arch, packing,
    live, no_cache, isolate (default off here: imports in this process), env)."""
    from kernelcheck.commands import doctor
    from kernelcheck.commands.context import Context

    options.setdefault("isolate", False)
    return doctor.run(doctor.Request(model=model, mode=mode, **options), Context.from_environ()).report


def plan_install(model: str, mode: str = "train", **options: Any) -> Report:
    """`kernelcheck install --model MODEL --dry-run`: the plan, nothing installed (commands/install.py `run` with
    `Request(dry_run=True, ...)`; options are Request's fields: wheelhouse, arch, source, allow_change, ...)."""
    from kernelcheck.commands import install
    from kernelcheck.commands.context import Context
    from kernelcheck.install.command import Request

    return install.run(Request(model=model, mode=mode, dry_run=True, **options), Context.from_environ()).report


def verify_model(model: str, mode: str = "train", shape: str = "tiny", **options: Any) -> Report:
    """`kernelcheck verify`: the doctor's report plus what running the real layers showed, assembled as the CLI
    assembles it (commands/verify.py `run`; options are its Request's fields: benchmark, tokens, step, layers,
    checkpointing, trace_dir, record). `verify --packing` is `kernelcheck.commands.verify.run` itself."""
    from kernelcheck.commands import verify
    from kernelcheck.commands.context import Context
    from kernelcheck.report.model import Report

    outcome = verify.run(verify.Request(model=model, mode=mode, shape=shape, **options), Context.from_environ())
    if not isinstance(outcome.report, Report):
        from kernelcheck.core.errors import BadInput

        raise BadInput("verify_model returns a Report; --packing's measurement is kernelcheck.commands.verify.run's.")
    return outcome.report


def analyze_trace(path: str | os.PathLike[str]) -> TraceAnalysis:
    """A torch profiler trace (.json or .json.gz) read and judged: verdict, steps, kernels (trace/analysis.py)."""
    from kernelcheck.commands.context import Context
    from kernelcheck.trace.analysis import analyze_file

    return analyze_file(path, m=Context.from_environ().matrix)


def trace_report(path: str | os.PathLike[str]) -> Report:
    """`kernelcheck trace FILE`: the Report behind the CLI (commands/trace.py `run`)."""
    import os

    from kernelcheck.commands import trace
    from kernelcheck.commands.context import Context

    return trace.run(trace.Request(os.fspath(path)), Context.from_environ()).report


def models() -> Models:
    """`kernelcheck models`: the aliases, the model types (as the installed transformers builds them) with their family
    and fast functions, and the families (commands/models.py `run`)."""
    from kernelcheck.commands import models as command
    from kernelcheck.commands.context import Context

    return command.run(command.Request(), Context.from_environ()).report


def resolve_model(query: str) -> ResolvedModel:
    """An alias, Hub id, model_type or folder resolved to a model, offline first (as --model is)."""
    from kernelcheck.commands.context import Context
    from kernelcheck.integrations import transformers_models

    return transformers_models.resolve(query, m=Context.from_environ().matrix)


def prefetch_hub_kernels(model: str, **options: Any) -> list[Step]:
    """`kernelcheck install --source hub`: the plan steps (`Step` values, kind hub) for the Hub kernels the model
    maps to (integrations/kernels_prefetch.py `prefetch_model`; options: mode, device, lock_path, dry_run,
    offline_only, env, progress, target)."""
    from kernelcheck.commands.context import Context
    from kernelcheck.integrations.kernels_prefetch import prefetch_model

    return prefetch_model(model, **options, m=Context.from_environ().matrix)


def applied_kernels(model: Any, expected: set[str] | None = None) -> list[dict[str, Any]]:
    """For a loaded model: per Hub kernel name, whether the Hub kernel replaced the torch forward."""
    from kernelcheck.integrations import kernels_prefetch

    return kernels_prefetch.applied_kernels(model, expected)


def applied_lines(rows: list[dict[str, Any]], use_kernels: bool | None = None) -> list[str]:
    """`applied_kernels`' rows as text lines."""
    from kernelcheck.integrations import kernels_prefetch

    return kernels_prefetch.applied_lines(rows, use_kernels)
