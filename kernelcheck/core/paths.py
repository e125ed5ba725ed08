"""What a path given on the command line really is, said in words, before anything opens it.

Opening a named pipe with no writer blocks forever (`kernelcheck trace FIFO`, `trace <(cmd)` whose cmd
failed); reading /dev/urandom never ends; /dev/null reads as an empty file. Every reader of a user's file
asks `regular_file` first, so such a path is bad input (exit 2) named for what it is, never a hang or a
"no such file".
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
