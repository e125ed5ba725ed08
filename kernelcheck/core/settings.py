"""Every setting kernelcheck reads from the process environment, in one place.

`Settings.from_environ()` reads them once; code that decides takes a `Settings` (or calls `current()` at
its edge), so a test passes its own values instead of patching os.environ. One set of yes-values (and of
no-values) applies to every boolean variable, so `KERNELCHECK_OFFLINE=on` means the same to model resolution, the
Hub check and install; `check_environ` refuses, at the start of every command, a KERNELCHECK_* value that is none
of them (or not a number in range, for the numeric ones).

| variable | meaning |
|---|---|
| KERNELCHECK_OFFLINE | no network for anything kernelcheck does (models, Hub, install: PyPI and release wheels) |
| HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE | the Hugging Face Hub may not be used (PyPI still may) |
| KERNELCHECK_HOME | base folder for kernelcheck's own files (default ~/.cache/kernelcheck) |
| KERNELCHECK_PROOF_DIR | a read-only folder of proofs made at image build (`warm --print-env`), looked up after home |
| KERNELCHECK_MATRIX_DIR | another matrix/ folder to decide on (a contributor's copy; default the shipped one) |
| KERNELCHECK_MANIFEST | the install manifest path (default sys.prefix/share/kernelcheck/manifest.json) |
| KERNELCHECK_RELEASE_MIRROR | an internal mirror of upstream GitHub release wheels |
| KERNELCHECK_NETWORK_TIMEOUT | seconds any single network wait may take (default 5) |
| KERNELCHECK_DEBUG | print tracebacks of internal errors |
| KERNELCHECK_IMPORT_TIMEOUT | seconds doctor waits for its import children (default 300; doctor/imports.py) |
| KERNELCHECK_IMPORT_CACHE | 0/off: doctor proves imports afresh, caches nothing (doctor --no-cache; proofcache.py) |
| KERNELCHECK_PROGRESS | 0/off: no progress lines on stderr for long steps (report/progress.py; --quiet does the same) |
| KERNELCHECK_PROGRESS_EVERY | seconds between progress lines in a log (not a terminal; default 30) |
| HF_HUB_CACHE | the Hugging Face cache kernels and models are read from |
| KERNELCHECK_VERBOSE | 1: log what was skipped, keep third-party output of live runs visible (--verbose) |
| KERNELCHECK_STEP_PROFILED | verify --step: how many steps are profiled |
| KERNELCHECK_CONTROL_SLOWDOWN | verify --step/--benchmark: the positive control's injected slowdown, percent |
| KERNELCHECK_MEASUREMENTS | JSON lines of measured steps (verify --step --record): GPU-hours of a fallback |
| KERNELCHECK_FLEET_ID | --all-ranks outside torchrun/Slurm: the fleet's run id |
| KERNELCHECK_GATE_MODEL | kernelcheck.ray.gate (a Ray worker_process_setup_hook): the model each worker checks |
| KERNELCHECK_GATE_MODE | kernelcheck.ray.gate: the mode checked (default train) |
| KERNELCHECK_GATE_TIMEOUT | kernelcheck.ray.gate: seconds a worker's check may take (default 300) |

The user's table of all of them, with defaults and flags, is docs/settings.md (tests/unit/test_settings_doc.py).

Read outside the package, never by kernelcheck itself: KERNELCHECK_BUILD_COMMIT (setup.py: the commit baked into a
wheel built without git), KERNELCHECK_TEST_CACHE, KERNELCHECK_TEST_CUDA_TORCH and KERNELCHECK_TEST_THOROUGH (the
test suite). No other KERNELCHECK_* name is used anywhere in the repository (tests/unit/test_settings_namespace.py);
the example gate scripts' own variables are KCGATE_* (examples/slurm-prolog.sh).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

YES = frozenset({"1", "ON", "YES", "TRUE", "Y"})
NO = frozenset({"0", "OFF", "NO", "FALSE", "N"})
HUB_OFFLINE_VARIABLES = ("KERNELCHECK_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
DEFAULT_NETWORK_TIMEOUT = 5.0
MIN_NETWORK_TIMEOUT = 0.1  # as `kernelcheck --network-timeout` (click.FloatRange(min=0.1))


def is_yes(value: str | None) -> bool:
    """The one reading of a boolean environment variable: 1, on, yes, true, y (any case)."""
    return (value or "").strip().upper() in YES


def is_on(value: str | None, default: bool) -> bool:
    """A boolean variable with a default: unset or empty is `default`, a YES value on, a NO value off (anything
    else is refused at start by `check_environ`, and read here as the default)."""
    text = (value or "").strip().upper()
    return True if text in YES else False if text in NO else default


# every KERNELCHECK_* variable whose value has a shape, checked once at start (`check_environ`): name -> kind
BOOLEANS = ("KERNELCHECK_OFFLINE", "KERNELCHECK_DEBUG", "KERNELCHECK_VERBOSE", "KERNELCHECK_IMPORT_CACHE",
            "KERNELCHECK_PROGRESS")
SECONDS = {"KERNELCHECK_NETWORK_TIMEOUT": (MIN_NETWORK_TIMEOUT, 86400.0, DEFAULT_NETWORK_TIMEOUT),
           "KERNELCHECK_IMPORT_TIMEOUT": (1.0, 86400.0, 300.0),
           "KERNELCHECK_PROGRESS_EVERY": (0.1, 86400.0, 30.0)}  # (least, most, default); a day at most
# verify --step: each profiled step is one more traced step; the controls' injected slowdown, in percent
COUNTS = {"KERNELCHECK_STEP_PROFILED": (1, 20), "KERNELCHECK_CONTROL_SLOWDOWN": (1, 400)}
FOLDERS = ("KERNELCHECK_PROOF_DIR",)  # an absolute path (a job's current folder is not the build's)


def check_environ(environ: Mapping[str, str] | None = None) -> None:
    """Every KERNELCHECK_* value read once, before a command does anything: a value kernelcheck cannot read is
    BadInput (exit 2) naming the variable, the value and what it takes, never a silent default or a failure
    minutes later when the value is first used."""
    env = os.environ if environ is None else environ
    problems = [p for p in (_problem(name, env[name]) for name in sorted(env) if name.startswith("KERNELCHECK_"))
                if p]
    if problems:
        from kernelcheck.core.errors import BadInput

        raise BadInput(" ".join(problems) + " Set it as docs/settings.md shows, or unset it.")


def _problem(name: str, raw: str) -> str:
    text = raw.strip()
    shown = raw if len(raw) <= 40 else raw[:37] + "..."
    if name in BOOLEANS:
        if text and text.upper() not in YES | NO:
            return f"{name}={shown!r} is not a yes/no value (1, on, yes, true, y or 0, off, no, false, n)."
    elif name in SECONDS:
        low, high, default = SECONDS[name]
        if text and not low <= _number(text) <= high:
            return (f"{name}={shown!r} is not a number of seconds from {low:g} to {high:g} (default {default:g}).")
    elif name in COUNTS:
        lo, hi = COUNTS[name]
        if text and not (text.isdigit() and lo <= int(text) <= hi):
            return f"{name}={shown!r} is not a whole number from {lo} to {hi}."
    elif name in FOLDERS and text and not os.path.isabs(text):
        return (f"{name}={shown!r} is not an absolute path: a folder named from the current folder is another "
                    "folder wherever the job starts elsewhere.")
    return ""


def seconds(name: str) -> float:
    """A SECONDS variable's value (its default when unset or empty); BadInput when out of range."""
    raw = os.environ.get(name, "")
    problem = _problem(name, raw)
    if problem:
        from kernelcheck.core.errors import BadInput

        raise BadInput(problem + " Set it as docs/settings.md shows, or unset it.")
    return _number(raw.strip()) if raw.strip() else SECONDS[name][2]


def count(name: str) -> int | None:
    """A COUNTS variable's value (None when unset or empty: the matrix's own); BadInput when out of range."""
    raw = os.environ.get(name, "")
    problem = _problem(name, raw)
    if problem:
        from kernelcheck.core.errors import BadInput

        raise BadInput(problem + " Set it as docs/settings.md shows, or unset it.")
    return int(raw.strip()) if raw.strip() else None


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def parse_network_timeout(raw: str | None) -> float:
    """The one reading of KERNELCHECK_NETWORK_TIMEOUT: unset or empty is the default (5 s); anything but a
    number of seconds of at least MIN_NETWORK_TIMEOUT is BadInput (exit 2), never a silent default."""
    text = (raw or "").strip()
    if not text:
        return DEFAULT_NETWORK_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    most = SECONDS["KERNELCHECK_NETWORK_TIMEOUT"][1]
    if not math.isfinite(value) or not MIN_NETWORK_TIMEOUT <= value <= most:
        from kernelcheck.core.errors import BadInput

        raise BadInput(f"KERNELCHECK_NETWORK_TIMEOUT={raw!r} is not a number of seconds from "
                       f"{MIN_NETWORK_TIMEOUT:g} to {most:g}: set it to one (e.g. {DEFAULT_NETWORK_TIMEOUT:g}, the "
                       "default), unset it, or use `kernelcheck --network-timeout SECONDS`.")
    return value


@dataclass(frozen=True)
class Settings:
    offline: bool = False  # KERNELCHECK_OFFLINE: no network at all
    hub_offline: bool = False  # the Hugging Face Hub may not be used (any of HUB_OFFLINE_VARIABLES)
    hub_offline_reason: str = ""  # which variable made it so, for messages
    home: Path = Path.home() / ".cache" / "kernelcheck"
    manifest: Path | None = None
    release_mirror: str | None = None
    network_timeout_text: str | None = None  # KERNELCHECK_NETWORK_TIMEOUT as set: read by `network_timeout`
    debug: bool = False
    hf_hub_cache: str | None = None
    matrix_dir: Path | None = None  # KERNELCHECK_MATRIX_DIR: the matrix/ folder read instead of the shipped one
    verbose: bool = False  # KERNELCHECK_VERBOSE=1 (--verbose)
    proof_dir: Path | None = None  # KERNELCHECK_PROOF_DIR: proofs baked into an image, read only, after `home`

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        offline_by = next((v for v in HUB_OFFLINE_VARIABLES if is_yes(env.get(v))), "")
        home = env.get("KERNELCHECK_HOME")
        manifest = env.get("KERNELCHECK_MANIFEST")
        return cls(
            offline=is_yes(env.get("KERNELCHECK_OFFLINE")), hub_offline=bool(offline_by),
            hub_offline_reason=f"{offline_by}={env.get(offline_by)}" if offline_by else "",
            home=Path(home) if home else Path.home() / ".cache" / "kernelcheck",
            manifest=Path(manifest) if manifest else None,
            release_mirror=env.get("KERNELCHECK_RELEASE_MIRROR") or None,
            network_timeout_text=env.get("KERNELCHECK_NETWORK_TIMEOUT"),
            debug=is_yes(env.get("KERNELCHECK_DEBUG")),
            hf_hub_cache=env.get("HF_HUB_CACHE") or None,
            matrix_dir=_matrix_dir(env),
            verbose=is_yes(env.get("KERNELCHECK_VERBOSE")),
            proof_dir=Path(env["KERNELCHECK_PROOF_DIR"].strip())
            if (env.get("KERNELCHECK_PROOF_DIR") or "").strip() else None,
        )

    @property
    def network_timeout(self) -> float:
        """Seconds any single network wait may take (BadInput for a value that is not one: only code that
        waits on the network reads it, so a bad value never stops a command that does not)."""
        return parse_network_timeout(self.network_timeout_text)

    @property
    def wheelhouse(self) -> Path:
        return self.home / "wheelhouse"

    @property
    def manifest_path(self) -> Path:
        return self.manifest or Path(sys.prefix) / "share" / "kernelcheck" / "manifest.json"


def _matrix_dir(env: Mapping[str, str]) -> Path | None:
    value = env.get("KERNELCHECK_MATRIX_DIR")
    return Path(value) if value else None


def matrix_dir() -> Path | None:
    """KERNELCHECK_MATRIX_DIR alone: matrix.load() asks it (core/entry.py: a command's Context, a child's entry
    point), so it reads this one variable, not every setting."""
    return _matrix_dir(os.environ)


def current() -> Settings:
    """The settings of this process now (read fresh: tests and users change variables between calls)."""
    return Settings.from_environ()


def offline() -> bool:
    """True when no network may be used at all (KERNELCHECK_OFFLINE)."""
    return current().offline


def hub_offline() -> bool:
    """True when the Hugging Face Hub may not be used (any of HUB_OFFLINE_VARIABLES)."""
    return current().hub_offline


def variable(name: str, default: str | None = None) -> str | None:
    """Any other KERNELCHECK_* variable (paths, mirrors, test knobs): read here, so every variable kernelcheck
    honours is found in this module."""
    return os.environ.get(name, default)


def set_variable(name: str, value: str) -> None:
    """Hand a CLI choice (--verbose, --network-timeout) to code and child processes that read it here."""
    os.environ[name] = value


def network_timeout() -> float:
    """Seconds any single network wait may take: `kernelcheck --network-timeout S` or KERNELCHECK_NETWORK_TIMEOUT
    (default 5); BadInput for a value that is not a number of seconds (`parse_network_timeout`)."""
    return current().network_timeout
