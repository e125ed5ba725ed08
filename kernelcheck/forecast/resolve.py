"""What pip would change: `pip install --dry-run --report` with this environment as the base.

`changes_from_report` is pure (pip's report JSON and the installed versions in, the changes out), so the
decision is tested in-process; `resolve` runs pip (the only part that needs a process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from kernelcheck.core import lifeline
from kernelcheck.core.errors import BadInput

# a forecast's temporary folders, each named by the pid that made it: the overlay, and pip's report
PREFIX = "kernelcheck-forecast-"
REPORT_PREFIX = "kernelcheck-resolve-"


@dataclass(frozen=True)
class Change:
    """One distribution the upgrade installs: `before` is None for a new one."""

    name: str
    before: str | None
    after: str
    url: str | None = None  # a direct reference (local wheel, URL, VCS checkout): installed as given, not by name

    @property
    def spec(self) -> str:
        return f"{self.name} @ {self.url}" if self.url else f"{self.name}=={self.after}"


@dataclass(frozen=True)
class Index:
    """Where pip may look: the index (default), or only a wheelhouse (`offline`)."""

    wheelhouse: str | None = None
    offline: bool = False

    @classmethod
    def of(cls, wheelhouse: str | None, offline_flag: bool, no_network: bool) -> Index:
        """--wheelhouse and --offline, with KERNELCHECK_OFFLINE (`no_network`): no network means pip sees the
        wheelhouse only (--no-index), and without one there is nothing to forecast from: BadInput."""
        offline = offline_flag or no_network
        if offline and not wheelhouse:
            why = "--offline" if offline_flag else "KERNELCHECK_OFFLINE is set, so"
            raise BadInput(f"{why} the forecast may not use the network: pass --wheelhouse DIR holding the "
                           "upgrade's wheels (pip then resolves from it alone), or unset KERNELCHECK_OFFLINE.")
        return cls(wheelhouse, offline)

    def args(self) -> list[str]:
        from kernelcheck.core.lifeline import PIP_NET  # the bound install's pip calls have: no 115 s waits

        out: list[str] = []
        if self.wheelhouse:
            out += ["--find-links", self.wheelhouse]
        out += ["--no-index"] if self.offline else PIP_NET
        return out


def installed_versions() -> dict[str, str]:
    """Name -> version of what this interpreter sees (sys.path order: the first found wins, as import does)."""
    out: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            out.setdefault(canonicalize_name(name), dist.version)
    return out


def changes_from_report(report: Mapping[str, Any], installed: Mapping[str, str]) -> list[Change]:
    """pip's installation report -> the distributions whose version would change (or appear)."""
    out = []
    for item in report.get("install", []) or []:
        meta = item.get("metadata", {}) if isinstance(item, dict) else {}
        name, version = meta.get("name"), meta.get("version")
        if not name or not version:
            continue
        before = installed.get(canonicalize_name(name))
        if before != version:
            out.append(Change(canonicalize_name(name), before, str(version), direct_url(item)))
    return sorted(out, key=lambda c: c.name)


def direct_url(item: Mapping[str, Any]) -> str | None:
    """The artifact pip chose for a direct requirement (a local wheel, a URL, a VCS checkout at its commit), from
    the report's download_info; None for a requirement resolved from an index by name."""
    info = item.get("download_info")
    if not item.get("is_direct") or not isinstance(info, dict) or not isinstance(info.get("url"), str):
        return None
    url: str = info["url"]
    vcs = info.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str) and isinstance(vcs.get("commit_id"), str):
        return f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
    return url


_FILE_FLAGS = ("-r", "--requirement", "-c", "--constraint")
_SINGLE_EQUALS = re.compile(r"^([A-Za-z0-9][\w.\[\],-]*)\s*=\s*([^=<>!~].*)$")
_EXAMPLE = "e.g. --upgrade transformers==5.25.0 kernels==0.19.1, or --upgrade -r requirements.txt"


def pip_args(specs: Sequence[str]) -> list[str]:
    """`--upgrade` values as pip arguments, each checked as pip reads it (commands/forecast.py `check`): a
    requirement (name[extras] op version), a wheel or sdist path that exists, a URL, or -r/-c FILE naming a file."""
    out: list[str] = []
    it = iter(specs)
    for s in it:
        if s in _FILE_FLAGS:
            path = next(it, None)
            if path is None:
                raise BadInput(f"--upgrade {s} needs a file after it (e.g. --upgrade {s} requirements.txt).")
            out += [s, _existing(path, s)]
        elif s.startswith(("-r", "-c")) and len(s) > 2 and not s.startswith("--"):
            out += [s[:2], _existing(s[2:], s[:2])]
        elif s.startswith("-"):
            raise BadInput(f"--upgrade takes requirement specs (transformers==5.25.0) or -r FILE, not {s!r}.")
        else:
            out.append(_spec(s))
    if not out:
        raise BadInput(f"--upgrade needs what to upgrade: one or more pip specs after it ({_EXAMPLE}).")
    return out


def _spec(tok: str) -> str:
    if "://" in tok or tok.startswith("git+"):
        return tok  # a URL: pip fetches it
    if os.sep in tok or tok.endswith((".whl", ".tar.gz", ".zip")):
        return _existing(tok, "")
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(tok)
    except InvalidRequirement as exc:
        single = _SINGLE_EQUALS.match(tok)
        hint = (f" pip compares versions with ==: did you mean {single.group(1)}=={single.group(2)}?" if single
                else f" ({str(exc).splitlines()[0]}).")
        raise BadInput(f"--upgrade {tok} is not a requirement pip reads.{hint} Give each spec as pip does "
                       "(transformers==5.25.0, 'kernels>=0.19'), a wheel path, or -r requirements.txt.") from None
    return tok


def _existing(path: str, flag: str) -> str:
    """An existing file after `flag` (-r, -c; "" for a wheel or sdist named as the spec itself)."""
    from kernelcheck.core import paths

    given = f"--upgrade {flag} {path}".replace("  ", " ")
    words = paths.kind(paths.checked(Path(path).expanduser(), f"--upgrade {flag}".strip()))
    what = {"-c": "constraints file", "--constraint": "constraints file", "": "wheel or sdist"}.get(
        flag, "requirements file")
    if words == paths.MISSING:
        raise BadInput(f"{given}: no such {what}.")
    if words is not None:
        raise BadInput(f"{given} is {words}, not a {what}: name the file itself (e.g. --upgrade {flag} "
                       f"{Path(path) / 'requirements.txt'}).".replace("  ", " "))
    return path


def resolve(specs: Sequence[str], index: Index, timeout: float = 600) -> list[Change]:
    """Ask pip (this interpreter's) what `pip install SPECS` would change here; nothing is installed."""
    # named by this pid, as the overlay is: a SIGKILLed forecast's folder is swept by the next (overlay.sweep)
    with tempfile.TemporaryDirectory(prefix=f"{REPORT_PREFIX}{os.getpid()}-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
               "--report", str(report), *index.args(), *pip_args(specs)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,  # pip's temp: swept with tmp
                                 env=dict(os.environ, TMPDIR=tmp), preexec_fn=lifeline.preexec())
        except subprocess.TimeoutExpired:
            raise BadInput(f"pip did not resolve --upgrade {' '.join(specs)} within {timeout:.0f} s.") from None
        if res.returncode != 0 or not report.exists():
            tail = " ".join((res.stderr or res.stdout).strip().splitlines()[-3:])[:600]
            raise BadInput(f"pip cannot resolve --upgrade {' '.join(specs)} here: {tail or 'no report'}. "
                           "Check the specs (and --wheelhouse/--offline: offline, pip sees only the wheelhouse).")
        data = json.loads(report.read_text(encoding="utf-8"))
    return changes_from_report(data, installed_versions())
