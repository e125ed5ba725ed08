"""Torch-minor drift: a compiled kernel package (a CUDA extension) is tied to the torch minor it was built for.

When an upgrade changes torch's minor, each installed compiled package is named with what it was built for
(kernelcheck's install manifest, else the wheel's local version tag `+cu13torch2.11...`, else the extension's
undefined torch symbols checked against the new torch's exported ones with `nm -D`), what will happen and the
fix. `judge` is pure; `installed_extensions` and `missing_symbols` read the disk."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.version import InvalidVersion, Version

from kernelcheck.core import lifeline
from kernelcheck.core.environment import torch_minor

_TAG = re.compile(r"torch(\d+)\.(\d+)")
_TORCH_SYMBOL = ("_ZN3c10", "_ZN2at", "_ZN5torch", "_ZNK3c10", "_ZNK2at")


@dataclass(frozen=True)
class Extension:
    """An installed compiled kernel package: its distribution, version, .so files, manifest torch minor."""

    distribution: str
    version: str
    libraries: tuple[Path, ...]
    manifest_torch_mm: str | None = None


@dataclass(frozen=True)
class Drift:
    distribution: str
    version: str
    built_for: str | None  # torch major.minor, where known
    evidence: str  # manifest | version-tag | symbols | unknown
    missing_symbols: int | None
    outcome: str  # import-error | silent-fallback | unknown
    fix: str

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def built_for(ext: Extension) -> tuple[str | None, str]:
    if ext.manifest_torch_mm:
        return ext.manifest_torch_mm, "manifest"
    m = _TAG.search(ext.version)
    if m:
        return f"{m.group(1)}.{m.group(2)}", "version-tag"
    return None, "unknown"


def outcome_for(transformers_version: str | None) -> str:
    """transformers >= 5.15 swallows a failing kernel import and runs the torch path; earlier ones raise."""
    try:
        return "silent-fallback" if transformers_version and Version(transformers_version) >= Version("5.15") \
            else "import-error"
    except InvalidVersion:
        return "unknown"


def judge(extensions: Iterable[Extension], torch_before: str | None, torch_after: str | None,
          transformers_after: str | None, missing: Mapping[str, int | None] | None = None) -> list[Drift]:
    """The compiled packages an upgrade from torch_before to torch_after orphans (empty if the minor stays)."""
    old, new = torch_minor(torch_before), torch_minor(torch_after)
    if not old or not new or old == new:
        return []
    out = []
    for ext in extensions:
        mm, evidence = built_for(ext)
        lost = (missing or {}).get(ext.distribution)
        if mm == new or (mm is None and lost == 0):
            continue
        if mm is None and lost:
            evidence = "symbols"
        fix = (f"after the upgrade: kernelcheck install --model M --package {ext.distribution} (builds or picks "
               f"a wheel for torch {new}), or a {ext.distribution} wheel built for torch {new}")
        out.append(Drift(ext.distribution, ext.version, mm or old, evidence, lost,
                         outcome_for(transformers_after), fix))
    return out


def installed_extensions(distributions: Iterable[str], manifest: Mapping[str, Mapping[str, object]]) -> list[Extension]:
    out = []
    for name in distributions:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        libs = tuple(Path(str(dist.locate_file(f))) for f in (dist.files or []) if str(f).endswith(".so"))
        entry = next((e for k, e in manifest.items() if e.get("distribution", k) == name), {})
        mm = entry.get("torch_mm")
        out.append(Extension(name, dist.version, libs, str(mm) if mm else None))
    return out


def _nm(args: list[str]) -> set[str] | None:
    nm = shutil.which("nm")
    if nm is None:
        return None
    try:
        res = subprocess.run([nm, "-D", *args], capture_output=True, text=True, timeout=120,
                             preexec_fn=lifeline.preexec())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {line.split()[-1] for line in res.stdout.splitlines() if line.strip()}


def missing_symbols(ext: Extension, torch_lib_dir: Path) -> int | None:
    """How many torch symbols the extension needs that the new torch does not export (None: cannot tell)."""
    libs = [str(p) for p in torch_lib_dir.glob("lib*.so*")]
    if not ext.libraries or not libs:
        return None
    needed = _nm(["--undefined-only", *map(str, ext.libraries)])
    exported = _nm(["--defined-only", *libs])
    if needed is None or exported is None:
        return None
    return len({s for s in needed if s.startswith(_TORCH_SYMBOL)} - exported)
