"""The command line: a thin click group; each command lives in its own module of this folder.

Exit codes, identical for every command: 0 ready · 3 a slow fallback path would run ·
4 broken (crash, refusal, wrong results) · 2 bad usage or bad input · 1 internal error ·
130 / 143 interrupted by SIGINT / SIGTERM (128 + the signal; cli/interrupts.py).
"""

from __future__ import annotations

import click

from kernelcheck.cli import interrupts
from kernelcheck.core import settings
from kernelcheck.report.terminal import COLOR_CHOICES, set_color

# each command's module, imported when the command is looked up: a run imports its own command only (the report
# model and the doctor's checks cost a padding run a tenth of a second of CPU), --help and completion all of them
_COMMANDS = {"compare": ("compare", "compare_command"), "doctor": ("doctor", "doctor"), "hub": ("hub", "hub"),
             "install": ("install", "install"), "models": ("models", "models"), "padding": ("padding", "padding"),
             "trace": ("trace", "trace"), "verify": ("verify", "verify"),
             "warm": ("warm", "warm")}


def _no_hyphen_breaks() -> None:
    """Help text never breaks a name at its hyphen ("causal-" / "conv1d"): click wraps with textwrap's default,
    which does. Its wrapper class is looked up when help is formatted; where click has none by that name, nothing
    changes."""
    import importlib

    try:
        module = importlib.import_module("click._textwrap")
    except ImportError:
        return
    base = getattr(module, "TextWrapper", None)
    if not isinstance(base, type) or getattr(base, "kernelcheck_whole_names", False):
        return

    class Whole(base):  # type: ignore[misc, valid-type]
        kernelcheck_whole_names = True

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.break_on_hyphens = False

    setattr(module, "TextWrapper", Whole)  # noqa: B010 - the module's own name, looked up by click at each wrap


_no_hyphen_breaks()


class _Group(click.Group):
    """click's own Ctrl-C handling says "Aborted!" and exits 1 (an internal error); an interruption while
    the command line is still being parsed exits 130/143 like one inside a command (cli/interrupts.py)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _COMMANDS:
            import importlib

            module, name = _COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(f"kernelcheck.cli.{module}"), name))
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            interrupts.report(ctx.invoked_subcommand or "", exc, False)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from kernelcheck.core import version

    click.echo(version.info().line())
    ctx.exit(0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", "-V", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version, the git commit and the date of the matrix/ data, and exit.")
@click.option("--network-timeout", type=click.FloatRange(min=0.1, max=86400), default=None, metavar="SECONDS",
              help="Longest single wait for the Hugging Face Hub (default 5, or KERNELCHECK_NETWORK_TIMEOUT).")
@click.option("--color", "color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True,
              help="Colour the verdict words: auto = on a terminal unless NO_COLOR is set; always; never.")
@click.option("--no-progress", "no_progress", is_flag=True,
              help="No progress lines on stderr (as KERNELCHECK_PROGRESS=0); also after the command.")
def main(network_timeout: float | None = None, color: str = "auto", no_progress: bool = False) -> None:
    """Will the fast kernels of your transformers model really run here? If not, why, and the exact fix.

    \b
    Typical use:
      kernelcheck doctor --model qwen3.8-27b            # static check, seconds
      kernelcheck install --model qwen3.8-27b --dry-run # what would be installed, and why
      kernelcheck verify --model qwen3.8-27b            # run the real layers under the profiler
      kernelcheck trace step.json.gz                    # why a "98% busy" GPU is starved
      kernelcheck models                                # the models it knows and their kernels

    Exit codes (every command): 0 ready, 3 a slow fallback path would run, 4 broken (crash, refusal or
    wrong results), 2 bad usage or input, 1 internal error, 130/143 interrupted by SIGINT/SIGTERM.
    Use `kernelcheck doctor --model M --mode train` as a pipeline gate.

    \b
    Settings: every KERNELCHECK_* variable is in docs/settings.md.
    Shell completion (bash; zsh and fish alike):
      eval "$(_KERNELCHECK_COMPLETE=bash_source kernelcheck)"     # in ~/.bashrc
    """
    set_color(color)
    if no_progress:
        settings.set_variable("KERNELCHECK_PROGRESS", "0")  # also for the child processes a command starts
    if network_timeout is not None:
        settings.set_variable("KERNELCHECK_NETWORK_TIMEOUT", str(network_timeout))




def run() -> None:
    """The `kernelcheck` command (console script and `python -m kernelcheck`): `main`, then the process ends at
    once with its exit code. Python's own teardown is skipped: it resets Python's signal handlers to the system
    default first (signalmodule `_PySignal_Fini`), and torch's teardown then takes long enough that a Ctrl-C in
    it ended the process as "killed by SIGINT" (exit -2, no message) instead of exit 130 (measured:
    tests/integration/test_signals.py verify-step). Nothing of kernelcheck's runs at exit: files and temporary
    folders are closed and removed by the commands' own `with` blocks."""
    import os
    import signal
    import sys

    stop = {signal.SIGINT, signal.SIGTERM}
    try:
        code = _invoke()
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # from here a signal waits, and the exit drops it
    except KeyboardInterrupt as exc:  # one that landed between the command's end and the line above
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)
        code = _interrupted(exc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _invoke() -> int:
    """`main` with click's errors shown as click shows them, and an interruption anywhere (also after the command's
    own handling, in click's cleanup, where click would say "Aborted!" and exit 1) as exit 130/143."""
    try:
        rv = main(standalone_mode=False)
    except SystemExit as exc:
        return _exit_code(exc)
    except click.exceptions.Abort as exc:  # click turns a KeyboardInterrupt (Interrupted) into Abort
        return _interrupted(exc.__cause__ if isinstance(exc.__cause__, KeyboardInterrupt) else KeyboardInterrupt())
    except click.ClickException as exc:  # usage errors: click's message, exit 2
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    return rv if isinstance(rv, int) else 0


def _interrupted(exc: BaseException) -> int:
    try:
        interrupts.report("", exc, False)
    except SystemExit as done:  # report is NoReturn: it always ends here
        return _exit_code(done)


def _exit_code(exc: SystemExit) -> int:
    import sys

    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


if __name__ == "__main__":
    run()
