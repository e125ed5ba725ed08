"""A dry run's `run:` lines as commands that work where they will be run: a wheel pip downloaded to inspect lives
in a temporary folder removed at the end of the dry run, and a plan for another machine (--torch/--cuda/--python)
inspected this machine's Python's wheels (cp311 for a cp312 target). Such a line names the requirement instead
(`einops==0.8.2`), and for a target the wheelhouse its pip looks in first (`--find-links WHEELHOUSE`)."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from kernelcheck.core.plan_step import Step
from kernelcheck.install import plan_types


def portable(plan: plan_types.Plan, downloads: Path, wheelhouse: Path, for_target: bool) -> plan_types.Plan:
    """`plan` with each install line that names a local wheel file it should not name written with its spec."""
    return replace(plan, steps=tuple(_portable(s, downloads, wheelhouse, for_target) for s in plan.steps))


def _portable(step: Step, downloads: Path, wheelhouse: Path, for_target: bool) -> Step:
    art = step.artifact
    if step.action != "install" or not art or "://" in art or not step.spec or art not in step.command:
        return step
    temporary = Path(art).is_relative_to(downloads)
    if not (temporary or for_target):
        return step  # a wheel in this machine's wheelhouse, installed here: the path stays true
    spec = shlex.quote(step.spec)
    return replace(step, command=step.command.replace(art, f"--find-links {wheelhouse} {spec}" if for_target
                                                      else spec))
