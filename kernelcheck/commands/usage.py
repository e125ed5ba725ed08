"""Usage rules the commands share. Each command's `check` (commands/<command>.py) holds its own rules and calls these;
its `run` calls `check` before anything is probed, so the library and the CLI refuse the same input with the same
one-paragraph BadInput (exit 2 in the CLI), found in well under a second."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from kernelcheck.core.errors import BadInput

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def refuse(flag: str, needs: str, why: str) -> NoReturn:
    """A flag given without the one it belongs to: never ignored silently."""
    raise BadInput(f"{flag} only applies with {needs}: {why} Drop {flag}, or add {needs}; nothing was run.")


def model(query: str | None, m: Matrix) -> None:
    """The model query resolved as the command will resolve it, except a Hub id (the HF cache, then the Hub: left to
    the command, it may need the network): an unknown name ("Did you mean ...") or a folder without config.json."""
    from kernelcheck.core import models

    if query is None or models.resolves_remotely(query, m=m):
        return
    from kernelcheck.integrations import transformers_models

    transformers_models.resolve(query, m=m)


def folder(path: str, flag: str, what: str) -> None:
    """`path` must be an existing folder; `what`: what the user should give instead."""
    from kernelcheck.core import paths

    p = paths.checked(Path(path).expanduser(), flag, what)
    if not p.is_dir():
        raise BadInput(f"{flag} {path}: the folder {'is a file' if p.exists() else 'does not exist'}. {what}")


def writable_folder(path: str, flag: str, what: str) -> None:
    """A folder a run will write into, created (with its parents) and a file written and removed there, for real:
    an unusable one is found before the run, whose output would be lost after it."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise BadInput(f"{flag} {path} is a file; give a folder (it is created if missing). Nothing was run.")
    from kernelcheck.core import paths

    try:
        paths.write_probe(target)
    except OSError as exc:
        raise BadInput(f"cannot write {what} to {str(target)!r}: {exc.strerror or exc}. Pass {flag} a folder you can "
                       "write (it is created if missing); nothing was run.") from None


def choice(flag: str, value: str | None, allowed: tuple[str, ...]) -> None:
    """A value from a flag's vocabulary (None: not given), for a library caller too (the CLI's choice list says the
    same before the command runs)."""
    if value is not None and value not in allowed:
        raise BadInput(f"{flag} must be {', '.join(allowed[:-1])} or {allowed[-1]}, not '{value}'.")


def mode(value: str) -> None:
    from kernelcheck.core.status import Mode

    choice("--mode", value, tuple(Mode))
