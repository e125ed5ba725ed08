"""Usage errors found before any probe: every argument that needs neither torch, a GPU nor the network is checked
here, first thing, so a mistyped model, spec or path is answered in well under a second (exit 2) instead of after
the environment probe (seconds, minutes on a loaded machine).

`check(command, values)` runs inside the error guard (cli/common.py `guarded`) before the command's own body; each
check raises the same BadInput the command would raise later, so the message and exit code do not change, only
when they come.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput

# model queries that resolve from the Hub cache or the Hub itself: left to the command (they may need the network)
_COMMANDS_WITH_MODEL = ("doctor", "verify", "install", "hub")


def check(command: str, values: dict[str, Any], upgrade: list[str] | None = None) -> None:
    """Raise BadInput for the first usage error `values` (the command's parsed options) carry. `upgrade`: the
    specs after doctor's --upgrade (cli/upgrade_args.py), None without it."""
    if command in _COMMANDS_WITH_MODEL and isinstance(values.get("model"), str):
        check_model(values["model"])
    if command == "doctor":
        if values.get("packing") is not None:
            check_packing(values["packing"])
        if values.get("upgrade") or any(values.get(k) for k in _FORECAST_ONLY):
            check_forecast(values, upgrade)
        if upgrade:
            check_specs(upgrade)
        if values.get("upgrade") and values.get("wheelhouse"):
            check_folder(values["wheelhouse"], "--wheelhouse")


_FORECAST_ONLY = {"if_worse": "--if-worse", "wheelhouse": "--wheelhouse", "offline": "--offline"}
_EXAMPLE = "e.g. --upgrade transformers==5.25.0 kernels==0.19.1, or --upgrade -r requirements.txt"


def check_forecast(values: dict[str, Any], specs: list[str] | None) -> None:
    """doctor --upgrade needs a spec; --if-worse, --wheelhouse and --offline need --upgrade. The message names
    the flags that were given, and only those."""
    given = [flag for key, flag in _FORECAST_ONLY.items() if values.get(key)]
    if values.get("upgrade") and not specs:
        raise BadInput(f"--upgrade needs what to upgrade: one or more pip specs after it ({_EXAMPLE}).")
    if not values.get("upgrade") and given:
        names = " and ".join([", ".join(given[:-1]), given[-1]] if len(given) > 1 else given)
        verb = "applies" if len(given) == 1 else "apply"
        raise BadInput(f"{names} {verb} to a forecast only: add --upgrade SPEC [SPEC...] ({_EXAMPLE}).")


def check_model(query: str) -> None:
    """The model query resolved as the command will resolve it, except a Hub id (the HF cache, then the Hub):
    an unknown name ("Did you mean ...") or a folder without config.json is bad input before any probe."""
    from kernelcheck.commands.context import Context
    from kernelcheck.core import models

    m = Context.from_environ().matrix  # the matrix the command's own Context will load (read once per process)
    if models.resolves_remotely(query, m=m):
        return
    from kernelcheck.integrations import transformers_models

    transformers_models.resolve(query, m=m)


def check_packing(mode: str) -> None:
    from kernelcheck.commands.context import Context
    from kernelcheck.packing import decide

    decide.check_mode(mode, decide.load_facts(m=Context.from_environ().matrix))  # the command's own matrix


_PIP_FILE_FLAGS = ("-r", "--requirement", "-c", "--constraint")
_SINGLE_EQUALS = re.compile(r"^([A-Za-z0-9][\w.\[\],-]*)\s*=\s*([^=<>!~].*)$")


def check_specs(specs: list[str]) -> None:
    """Each --upgrade spec as pip reads it: a requirement (name[extras] op version), a wheel or sdist path that
    exists, a URL, or -r/-c FILE naming a readable file."""
    i = 0
    while i < len(specs):
        tok = specs[i]
        if tok in _PIP_FILE_FLAGS:
            if i + 1 >= len(specs):
                raise BadInput(f"--upgrade {tok} needs a file after it (e.g. --upgrade {tok} requirements.txt).")
            _check_file(specs[i + 1], f"--upgrade {tok}")
            i += 2
            continue
        if tok.startswith(("-r", "-c")) and not tok.startswith("--"):
            _check_file(tok[2:], f"--upgrade {tok[:2]}")
        else:
            check_spec(tok)
        i += 1


def check_spec(tok: str) -> None:
    if "://" in tok or tok.startswith("git+"):
        return  # a URL: pip fetches it
    if os.sep in tok or tok.endswith((".whl", ".tar.gz", ".zip")):
        _check_file(tok, "--upgrade")
        return
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(tok)
    except InvalidRequirement as exc:
        single = _SINGLE_EQUALS.match(tok)
        hint = (f" pip compares versions with ==: did you mean {single.group(1)}=={single.group(2)}?" if single
                else f" ({str(exc).splitlines()[0]}).")
        raise BadInput(f"--upgrade {tok} is not a requirement pip reads.{hint} Give each spec as pip does "
                       "(transformers==5.25.0, 'kernels>=0.19'), a wheel path, or -r requirements.txt.") from None


def _check_file(path: str, flag: str) -> None:
    from kernelcheck.core import paths

    p = paths.checked(Path(path).expanduser(), flag, "Give the path of an existing file.")
    if not p.is_file():
        what = "is a folder" if p.is_dir() else "does not exist"
        raise BadInput(f"{flag} {path}: the file {what}. Give the path of an existing file.")


def check_folder(path: str, flag: str) -> None:
    from kernelcheck.core import paths

    p = paths.checked(Path(path).expanduser(), flag, "Give the folder that holds the wheels.")
    if not p.is_dir():
        what = "is a file" if p.exists() else "does not exist"
        raise BadInput(f"{flag} {path}: the folder {what}. Give the folder that holds the wheels.")
