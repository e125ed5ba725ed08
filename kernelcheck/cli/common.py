"""What every command shares: option help, the error guard (exit codes, no traceback), finishing a report."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kernelcheck import schemas
from kernelcheck.cli import interrupts, outfile, stdout_fd
from kernelcheck.core import paths, settings, signals
from kernelcheck.core.errors import KernelcheckError
from kernelcheck.core.status import EXIT_BROKEN, EXIT_INTERNAL, Mode, Verdict
from kernelcheck.report.terminal import Terminal, present

if TYPE_CHECKING:
    from kernelcheck.commands.context import Context
    from kernelcheck.report.model import Report

MODEL_HELP = ("Model: an alias (qwen3.8-27b; see `kernelcheck models`), a Hub id (Qwen/Qwen3.8-27B: HF cache first, "
              "then config.json only from the Hub), a model_type (mamba2) or a folder with config.json.")
MODE_HELP = "train (forward+backward: backward-only breakages count) or infer (prefill+decode)."
MODE_CHOICE = click.Choice([m.value for m in Mode])  # the one --mode vocabulary every command accepts


def _junit_error(command: str, kwargs: dict[str, Any], exc: KernelcheckError) -> None:
    """A run that ends before its report still leaves the --junit file, holding the reason."""
    if not kwargs.get("junit"):
        return
    from kernelcheck.report import junit as junit_mod

    try:
        junit_mod.write_error(command, kwargs["junit"], exc.message, exc.exit_code, kwargs.get("model"))
    except KernelcheckError:
        pass  # the original error is the one to report


def _emit_error(command: str, as_json: bool, exc: KernelcheckError, model: str | None = None) -> None:
    # an environment no job can run in (BrokenEnvironment)
    verdict = Verdict.BROKEN if exc.exit_code == EXIT_BROKEN else None
    error = {"schema": schemas.ERROR, "command": command, "verdict": verdict, "exit_code": exc.exit_code,
             "error": exc.message}
    outfile.write_error(error, exc.message, exc.exit_code, model)
    if as_json:
        click.echo(json.dumps(error, indent=2))
    click.echo(f"kernelcheck {command}: {exc.message}", err=True)


def _output() -> dict[str, bool]:
    """This invocation's --quiet and --verbose, kept in click's context (nothing carries over to the next command
    run in the same process; outside a command both are off)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return {"quiet": False, "verbose": False}
    out: dict[str, bool] = ctx.meta.setdefault("kernelcheck.output", {"quiet": False, "verbose": False})
    return out


def context(sink: Callable[[str], None] | None = None, *, as_json: bool = False) -> Context:
    """The command's Context: the settings read once from the environment, --verbose, --json, and where progress
    lines go (`sink`; default: nowhere)."""
    from kernelcheck.commands.context import Context, drop

    return Context.from_environ(sink=sink or drop, verbose=_output()["verbose"], json=as_json, progress=True)


def verbose() -> bool:
    """--verbose was given: text reports show every info finding (render_findings groups them otherwise)."""
    return _output()["verbose"]


F = TypeVar("F", bound=Callable[..., Any])


def output_options(fn: F) -> F:
    """--quiet (the verdict line only), --verbose (kernelcheck's log on stderr), --no-progress and --color, on
    every command (--color also before the command, as `kernelcheck --color never doctor`)."""
    from kernelcheck.report.terminal import COLOR_CHOICES

    fn = click.option("--color", "color", type=click.Choice(COLOR_CHOICES), default=None,
                      help="Colour the verdict words: auto = on a terminal unless NO_COLOR is set; always; never.")(fn)
    fn = click.option("--no-progress", "no_progress", is_flag=True,
                      help="No progress lines on stderr (as KERNELCHECK_PROGRESS=0).")(fn)
    fn = click.option("--verbose", "-v", "verbose", is_flag=True,
                      help="Show every info finding, and log what was skipped or not found (stderr).")(fn)
    return click.option("--quiet", "-q", "quiet", is_flag=True, help="Print the verdict line only.")(fn)


def mode_option(fn: F) -> F:
    """--mode train|infer (default train), passed to the command as a Mode."""
    return click.option("--mode", type=MODE_CHOICE, default=Mode.TRAIN.value, show_default=True, help=MODE_HELP,
                        callback=lambda _ctx, _param, value: Mode(value))(fn)


DEVICE_CHOICE = click.Choice(["cuda", "rocm", "xpu", "cpu", "mps", "npu"])  # kernels' device types


def device_option(dest: str, aliases: tuple[str, ...] = ()) -> Callable[[F], F]:
    """--device TYPE: the device type the job's model runs on, the device of the verdict (doctor and hub alike), stored
    as `dest`; `aliases`: its other spellings (doctor's earlier name --hub-device)."""
    return click.option("--device", *aliases, dest, type=DEVICE_CHOICE, default=None,
                        help="Device type the job runs on: the device of the whole verdict (default: a visible GPU; "
                             "--arch: cuda; else the torch build's: cuda for a CUDA build, as a prediction for a "
                             "CUDA machine when no GPU is visible, cpu for a CPU build). --device cpu: running here.")


def _setup_output(kwargs: dict[str, Any]) -> None:
    output = _output()
    output["quiet"] = bool(kwargs.pop("quiet", False))
    from kernelcheck.report import progress

    progress.set_quiet(output["quiet"])  # --quiet: no progress lines either
    if kwargs.pop("no_progress", False):
        settings.set_variable("KERNELCHECK_PROGRESS", "0")  # also for the child processes a command starts
    color = kwargs.pop("color", None)
    if color is not None:
        from kernelcheck.report.terminal import set_color

        set_color(color)
    verbose = output["verbose"] = bool(kwargs.pop("verbose", False))  # the command's Context carries it (context())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="kernelcheck: %(name)s: %(message)s")


def emit(text: str, *, is_json: bool = False) -> None:
    """Print the command's output. A reader that went away (`kernelcheck doctor | head -1`, `| true`) is not
    an error: the rest is dropped quietly and the exit code stays the verdict's.

    Text is adapted to a terminal (report/terminal.py: width, colour, --quiet); JSON is printed as it is.
    """
    stdout_fd.release()  # --json: fd 1 pointed at stderr while the command ran (cli/stdout_fd.py)
    term = None if is_json else Terminal.detect(sys.stdout, quiet=_output()["quiet"])
    if term is not None:
        text = present(text, term)
    try:
        click.echo(text, color=True if term is not None and term.colour else None)  # --color always: kept piped
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()


def shown(text: str) -> None:
    """Text a command prints while it runs (install's plan before anything runs, its progress, the doctor after
    it): fitted to the terminal as the report is (100 columns when piped), and nothing with --quiet."""
    if not _output()["quiet"]:
        emit(text)


def _drop_stdout() -> None:
    # Python flushes stdout again at exit; point it at /dev/null so that flush cannot raise (Python docs,
    # "Note on SIGPIPE" in the signal module).
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def check_junit_path(path: str | None) -> None:
    """An unwritable --junit file is bad input found before the run, not after it (the report would be lost)."""
    outfile.check_writable(path, "--junit", "JUnit", "doctor.xml")


def _checked_then(command: str, fn: Callable[..., int], args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The checks of the command line itself (the settings, the paths named, -o, --junit), then the command, whose
    `run` checks its own usage first (commands/<command>.py `check`). Under --all-ranks a rank whose command line is
    bad still joins the fleet with that error (cli/fleet.py run_with_error): exit 2 in the fleet table."""
    try:
        settings.check_environ()  # every KERNELCHECK_* value, once, before anything runs
        paths.check_named(kwargs)  # every path named: an OSError on one is exit 2 (core/paths.py)
        outfile.take(command, kwargs)  # -o FILE, checked before the run
        check_junit_path(kwargs.get("junit"))
    except KernelcheckError as exc:
        if not kwargs.get("all_ranks"):
            raise
        return fn(*args, **kwargs, early_error=exc)  # the --all-ranks wrapper (cli/fleet.py) reports it
    return fn(*args, **kwargs)


def guarded(command: str) -> Callable[[Callable[..., int]], Callable[..., None]]:
    """Turn known errors into their exit code and message; unknown ones into exit 1, no traceback."""

    def deco(fn: Callable[..., int]) -> Callable[..., None]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            as_json = bool(kwargs.get("as_json"))
            _setup_output(kwargs)
            try:
                with signals.routed(), stdout_fd.reserved(as_json):
                    code = _checked_then(command, fn, args, kwargs)
            except KeyboardInterrupt as exc:  # SIGINT or SIGTERM: exit 130 / 143, cleanup done on the way out
                interrupts.report(command, exc, as_json)
            except KernelcheckError as exc:
                _junit_error(command, kwargs, exc)
                _emit_error(command, as_json, exc, kwargs.get("model"))
                sys.exit(exc.exit_code)
            except (click.exceptions.Exit, click.ClickException):
                raise
            except BrokenPipeError:  # the output's reader left before the verdict was printed
                _drop_stdout()
                sys.exit(EXIT_INTERNAL)  # output went missing before a verdict: not a pass
            except Exception as exc:  # noqa: BLE001 - the documented exit 1
                if settings.current().debug:
                    traceback.print_exc()
                err = KernelcheckError(f"internal error ({type(exc).__name__}: {exc}). This is a kernelcheck bug; "
                                       "rerun with KERNELCHECK_DEBUG=1 for the traceback and report it.")
                err.exit_code = EXIT_INTERNAL
                _junit_error(command, kwargs, err)
                _emit_error(command, as_json, err, kwargs.get("model"))
                sys.exit(EXIT_INTERNAL)
            sys.exit(code or 0)

        return wrapper

    return deco


def finish(report: Report, as_json: bool, junit: str | None = None) -> int:
    from kernelcheck.fleet import handoff
    from kernelcheck.report.model import render_json  # here: padding and compare never load the report model
    from kernelcheck.report.text import render_text

    if handoff.take(report):  # --all-ranks: the fleet gate prints, on rank 0
        return report.exit_code
    if junit:
        from kernelcheck.report import junit as junit_mod

        junit_mod.write(report, junit)
    if outfile.path():
        outfile.write(render_json(report), report)
    emit(render_json(report) if as_json else render_text(report, verbose=verbose()), is_json=as_json)
    return report.exit_code


