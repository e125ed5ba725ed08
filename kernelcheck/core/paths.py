"""What a path given on the command line really is, said in words, before anything opens it.

Opening a named pipe with no writer blocks forever (`kernelcheck trace FIFO`, `trace <(cmd)` whose cmd
failed); reading /dev/urandom never ends; /dev/null reads as an empty file. Every reader of a user's file
asks `regular_file` first, so such a path is bad input (exit 2) named for what it is, never a hang or a
"no such file".
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Any

from kernelcheck.core.errors import BadInput

FIFO = "a named pipe (FIFO) or a shell process substitution"
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, FIFO), (stat.S_ISSOCK, "a socket"))


MISSING = "missing"


def kind(path: str | os.PathLike[str]) -> str | None:
    """None for a regular file (after symlinks); else what it is, in words ("a character device", ...)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else MISSING
    except NotADirectoryError:
        return MISSING
    except OSError as exc:
        return f"not readable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def regular_file(path: str | os.PathLike[str], what: str, hint: str) -> Path:
    """`path` as a Path when it is a regular file; BadInput saying what it is otherwise.

    `what` names the argument ("the trace", "--model"), `hint` says what to give instead.
    """
    words = kind(path)
    if words is None:
        return Path(path)
    if words == MISSING:
        raise BadInput(f"{what} {path} does not exist (no such file or folder). {hint}")
    detail = ""
    if words == FIFO:
        detail = " (reading one waits for a writer that may never come)"
    elif words == "a character device":
        detail = " (such as /dev/null or /dev/urandom: it has no data kernelcheck can read)"
    raise BadInput(f"{what} {path} is {words}, not a regular file{detail}. {hint}")


# -- the one checked opener: every path the user names (--model, --junit, -o, --target, compare's reports, ...) --
# An OSError on a path is the user's input, never an internal error: a component over 255 bytes (ENAMETOOLONG), a
# read-only mount (EROFS), no permission (EACCES, EPERM), a file where a folder is meant (ENOTDIR).

_WHY = {errno.ENAMETOOLONG: "a part of the path is longer than the file system allows (255 bytes per name)",
        errno.EROFS: "it is on a read-only file system", errno.EACCES: "permission denied",
        errno.EPERM: "the operation is not permitted there",
        errno.ENOTDIR: "a part of the path is a file, not a folder",
        errno.EEXIST: "a part of the path is a file, not a folder", errno.ELOOP: "too many symbolic links"}


def write_probe(folder: Path) -> None:
    """Create `folder` (and its parents) and write and remove a file there, for real: OSError where a run could not
    write into it (a read-only mount, a file in the way, no permission)."""
    probe = folder / f".kernelcheck-probe-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    probe.write_bytes(b"")
    probe.unlink()


def os_error(path: str | os.PathLike[str], what: str, exc: OSError, hint: str = "") -> BadInput:
    """BadInput for an OSError on a path the user named: `what` names the argument ("--junit"), `hint` what to
    give instead."""
    why = _WHY.get(exc.errno or 0) or exc.strerror or str(exc)
    shown = os.fspath(path)
    shown = shown if len(shown) <= 120 else shown[:60] + "..." + shown[-40:]
    return BadInput(f"{what} {shown}: {why}. {hint or 'Give a path kernelcheck can use.'}".rstrip())


def checked(path: str | os.PathLike[str], what: str, hint: str = "") -> Path:
    """`path` as a Path when the file system can look it up (it may not exist: the caller says whether that is
    fine); BadInput for any other OSError (ENAMETOOLONG, EACCES, ELOOP...)."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise os_error(path, what, exc, hint) from None
    except ValueError:  # an embedded NUL byte
        raise BadInput(f"{what}: the path holds a NUL byte, which no file name can.") from None
    return Path(path)


def open_checked(path: str | os.PathLike[str], mode: str, what: str, hint: str = "",
                 encoding: str | None = None) -> IO[Any]:
    """open(), with an OSError turned into BadInput naming the argument (the one opener for a user's path)."""
    try:
        return open(path, mode, encoding=encoding)  # the caller closes it
    except OSError as exc:
        raise os_error(path, what, exc, hint) from None


# the parameters, across commands, that name a path the user gave: checked before the command runs
NAMED_PATHS = {"model": "--model", "junit": "--junit", "target": "--target", "reports": "the report",
               "wheelhouse": "--wheelhouse", "sdist": "--sdist", "record": "--record", "trace_dir": "--trace-dir",
               "lock": "--lock", "tokenizer": "--tokenizer", "plot": "--plot", "annotate": "--annotate",
               "data": "the data file", "file": "the trace"}


_HINTS = {"model": "Give a model folder with config.json, an alias (kernelcheck models) or a Hub id.",
          "reports": "Give report files (kernelcheck doctor --json > node.json) or folders of them."}


def check_named(kwargs: dict[str, Any]) -> None:
    """Every path parameter of a command (NAMED_PATHS), checked with `checked` before the command runs."""
    for key, what in NAMED_PATHS.items():
        value = kwargs.get(key)
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, str) and item:
                checked(item, what, _HINTS.get(key, ""))
