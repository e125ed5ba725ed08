"""`kernelcheck doctor --model M --upgrade SPEC...`: doctor before and after what pip would install.

1. pip resolves the change (resolve.py, this environment as the base; nothing installed);
2. the changed distributions go into a throwaway overlay (overlay.py);
3. doctor's static reading runs in a fresh process without, then with, the overlay first on PYTHONPATH;
4. the two reports are compared (diff.py), compiled packages orphaned by a torch-minor change named (drift.py).
The exit code is the after-verdict's (with --if-worse: only when it is worse than before, else 0)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcheck import schemas
from kernelcheck.core import lifeline, version
from kernelcheck.core.environment import torch_minor
from kernelcheck.core.errors import BadInput, KernelcheckError
from kernelcheck.forecast import drift as drift_mod
from kernelcheck.forecast.diff import Diff, diff
from kernelcheck.forecast.resolve import Change, Index, pip_args, resolve
from kernelcheck.report.model import Report, read_report

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

log = logging.getLogger(__name__)

SCHEMA = schemas.schema_id("forecast")


@dataclass
class Forecast:
    specs: list[str]
    changes: list[Change]
    before: Report  # doctor's report in this environment, read once from the fresh process's stdout
    after: Report  # doctor's report over the overlay (the same report when pip changes nothing)
    diff: Diff
    drift: list[drift_mod.Drift] = field(default_factory=list)
    if_worse: bool = False

    @property
    def exit_code(self) -> int:
        if self.if_worse and not self.diff.worse:
            return 0
        return self.diff.exit_after

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "command": "doctor --upgrade", "specs": self.specs,
                "verdict": self.diff.verdict_after, "exit_code": self.exit_code,
                "changes": [c.__dict__ for c in self.changes], "diff": self.diff.to_json(),
                "torch_drift": [d.to_json() for d in self.drift], "before": self.before.to_json(),
                "after": self.after.to_json(),
                **({"device": self.before.device.to_json()} if self.before.device is not None else {})}


def _pythonpath(overlay: Path | None) -> str:
    parts = [str(overlay)] if overlay else []
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    root = version.PACKAGE.parent
    if root.name not in ("site-packages", "dist-packages"):  # run from a checkout: the child needs it too
        parts.append(str(root))
    return os.pathsep.join(parts)


def _doctor(args: Sequence[str], overlay: Path | None, timeout: float) -> Report:
    env = dict(os.environ, PYTHONPATH=_pythonpath(overlay), KERNELCHECK_IMPORT_CACHE="0")
    env.pop("KERNELCHECK_DEBUG", None)
    cmd = [sys.executable, "-m", "kernelcheck", "doctor", "--json", *args]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                             stdin=subprocess.DEVNULL, preexec_fn=lifeline.preexec())  # dies with kernelcheck
    except subprocess.TimeoutExpired:
        raise KernelcheckError(f"doctor {'over the overlay ' if overlay else ''}did not finish within "
                               f"{timeout:.0f} s.") from None
    report = read_doctor(res.stdout)
    if report is None:
        tail = " ".join(res.stderr.strip().splitlines()[-2:])[:500]
        where = "after the upgrade (over the overlay)" if overlay else "in this environment"
        err = KernelcheckError(f"doctor {where} gave no report (exit {res.returncode}): {tail}")
        err.exit_code = res.returncode if res.returncode in (2, 3, 4) else 1
        raise err
    return report


def read_doctor(stdout: str) -> Report | None:
    """doctor's --json stdout read once, typed (report/model.read_report); None when it holds no report: not JSON,
    not an object, the error a doctor stopped on (no verdict), or a report this kernelcheck cannot read."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("verdict") is None:
        return None
    try:
        report = read_report(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        log.info("doctor's report does not read back: %s: %s", type(exc).__name__, exc)
        return None
    return report if isinstance(report, Report) else None


def _torch_version(report: Report) -> str | None:
    env = report.environment
    return env.torch.version if env is not None and env.torch is not None else None


def _drift(changes: list[Change], before: Report, after: Report, overlay: Path, *,
           m: Matrix) -> list[drift_mod.Drift]:
    from kernelcheck.core import manifest

    tb, ta = _torch_version(before), _torch_version(after)
    if torch_minor(tb) == torch_minor(ta):
        return []
    dists = [d for p in m.packages.values() if p.kind == "cuda-extension" for d in p.distributions]
    changed = {c.name for c in changes}
    exts = [e for e in drift_mod.installed_extensions(dists, manifest.read()["packages"]) if e.distribution
            not in changed]
    missing = {e.distribution: drift_mod.missing_symbols(e, overlay / "torch" / "lib") for e in exts}
    return drift_mod.judge(exts, tb, ta, after.environment.transformers if after.environment else None, missing)


def run(specs: Sequence[str], doctor_args: Sequence[str], index: Index, if_worse: bool = False,
        timeout: float = 900, *, m: Matrix) -> Forecast:
    from kernelcheck.forecast.overlay import overlay

    if not specs:
        raise BadInput("--upgrade needs at least one spec, e.g. --upgrade transformers==5.25.0 kernels==0.19.1.")
    pip_args(specs)  # a bad -r FILE is refused before any doctor runs
    before = _doctor(doctor_args, None, timeout)
    changes = resolve(specs, index)
    with overlay(changes, index) as folder:
        after = _doctor(doctor_args, folder, timeout) if changes else before
        drift = _drift(changes, before, after, folder, m=m) if changes else []
    return Forecast(list(specs), changes, before, after, diff(before, after), drift, if_worse)
