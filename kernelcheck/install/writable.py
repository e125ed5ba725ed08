"""The folders a real install writes to, checked before anything runs: a read-only HOME or KERNELCHECK_HOME (a
container's usual state) makes the default wheelhouse under ~/.cache unwritable, and an --target may sit on a
read-only mount or under a file. Each is bad input (exit 2) named with the way out, never an OSError at the lock or
in pip."""

from __future__ import annotations

from pathlib import Path

from kernelcheck.core import paths


def folder(path: Path, what: str, hint: str) -> Path:
    """`path`, created if missing, when kernelcheck can write there; BadInput naming `what` and `hint` if not."""
    try:
        paths.write_probe(path)
    except OSError as exc:
        raise paths.os_error(path, f"{what}: cannot write", exc, hint) from None
    return path


def wheelhouse(path: Path, named: bool) -> Path:
    """The wheelhouse a real install keeps its lock and the wheels it downloads or builds in (`named`: the user
    gave it as --wheelhouse)."""
    what = "--wheelhouse" if named else "the default wheelhouse (KERNELCHECK_HOME/wheelhouse)"
    return folder(path, what, "A real install keeps its lock and the wheels it downloads or builds there: set "
                  "KERNELCHECK_HOME to a writable folder, or pass --wheelhouse DIR naming one (a read-only HOME is "
                  "common in containers); nothing was installed.")


def target(path: str | None) -> None:
    """--target DIR: the folder pip installs into must be one kernelcheck can write."""
    if path:
        folder(Path(path), "--target", "Give --target a folder on a writable file system (it is created if "
               "missing); nothing was installed.")
