"""-o FILE / --output FILE: the machine-readable report to a file while the text goes to the terminal.

Semantics (doctor, verify, install, hub, trace, padding, models, compare):
- FILE ending in .xml gets JUnit XML (doctor and verify, as --junit); any other name gets the command's JSON, the
  same object `--json` prints (schema kernelcheck.report/1).
- stdout is unchanged: the text report, or the JSON with --json.
- A run that ends in an error (exit 1/2) still writes FILE: the JSON error object (or the JUnit error case), so a CI
  step that uploads it always finds one.
- FILE is checked before the run (a folder, or an unwritable place, is exit 2 at once); its folders are created.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kernelcheck.core import paths
from kernelcheck.core.errors import BadInput

F = TypeVar("F", bound=Callable[..., Any])
JUNIT_COMMANDS = ("doctor", "verify")


def output_file_option(fn: F) -> F:
    return click.option("--output", "-o", "output_file", type=click.Path(dir_okay=False), default=None,
                        metavar="FILE",
                        help="Also write the report to FILE: JSON (as --json), or JUnit XML when FILE ends in .xml "
                             "(doctor, verify); the text still goes to the terminal.")(fn)


def _state() -> dict[str, str | None]:
    """This invocation's -o FILE and command, kept in click's context: nothing carries over to the next command
    run in the same process (a test's CliRunner, a library caller), and nothing outside a command has one."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return {"path": None, "command": None}
    state: dict[str, str | None] = ctx.meta.setdefault("kernelcheck.output_file", {"path": None, "command": None})
    return state


def take(command: str, kwargs: dict[str, Any]) -> None:
    """Pop -o from the command's arguments and check it before the run (BadInput: exit 2, nothing run)."""
    path = kwargs.pop("output_file", None)
    _state().update(path=path, command=command)
    if not path:
        return
    if path.endswith(".xml") and command not in JUNIT_COMMANDS:
        raise BadInput(f"-o {path}: kernelcheck {command} writes JSON only (JUnit XML is for doctor and verify); "
                       "give a .json file name.")
    check_writable(path, "-o", "output", "doctor.json")


def check_writable(path: str | None, flag: str, kind: str, example: str) -> None:
    """An unwritable report file (--junit, -o) is bad input found before the run, not after it.

    The same steps as the writers (parent folders created, a temporary file beside the target), tried for real:
    permission bits say nothing for root or a read-only mount.
    """
    if not path:
        return
    hint = f"Pass {flag} a path in a writable folder (it is created if missing); nothing was run."
    target = paths.checked(path, flag, hint)
    if target.is_dir():
        raise BadInput(f"{flag} {path} is a folder; give a file name such as {target / example}.")
    probe = target.with_name(f".{target.name}.kernelcheck-probe")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise paths.os_error(target, f"cannot write the {kind} file: {flag}", exc, hint) from None


def path() -> str | None:
    return _state()["path"]


def write(json_text: str, report: Any = None) -> None:
    """Write the report (JSON text; `report` for JUnit) to -o FILE, when one was given."""
    target = _state()["path"]
    if not target:
        return
    if target.endswith(".xml") and report is not None:
        from kernelcheck.report import junit

        junit.write(report, target)
        return
    out = Path(target)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json_text if json_text.endswith("\n") else json_text + "\n", encoding="utf-8")


def write_error(error: dict[str, Any], message: str, exit_code: int, model: str | None) -> None:
    """The run ended before a report: the file holds the error (never a stale report of an earlier run)."""
    state = _state()
    target, command = state["path"], state["command"] or ""
    if not target:
        return
    try:
        if target.endswith(".xml"):
            from kernelcheck.report import junit

            junit.write_error(command, target, message, exit_code, model)
        else:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text(json.dumps(error, indent=2) + "\n", encoding="utf-8")
    except OSError:
        pass  # the original error is the one to report
