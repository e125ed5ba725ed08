"""Errors that end a command with a documented exit code and a one-paragraph message."""

from __future__ import annotations


class KernelcheckError(Exception):
    """Base class: `message` is shown to the user as is, `exit_code` ends the process."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadInput(KernelcheckError):
    """Bad usage or bad input (unknown model, malformed config, no torch): exit 2."""

    exit_code = 2


class BrokenEnvironment(KernelcheckError):
    """The environment cannot run any job (torch installed but its import fails): BROKEN, exit 4."""

    exit_code = 4


class InstallFailed(KernelcheckError):
    """An install step failed; the environment was left (or put back) as it was. Exit 4."""

    exit_code = 4


class BuildFailed(InstallFailed):
    """A source build failed (an install step: --arch builds); nothing was installed. Exit 4."""


class FleetError(KernelcheckError):
    """The fleet gate (--all-ranks) could not finish: a rank never joined, died, or no verdict came. Exit 4."""

    exit_code = 4


class FleetFailure(FleetError):
    """Raised inside the gather (kernelcheck.fleet.gather); the message names the ranks at fault."""


class GateFailed(KernelcheckError):
    """A Ray worker's gate (kernelcheck.ray.gate) stops the worker before actor code: its check did not say READY.
    `exit_code` is that check's (3 fallback, 4 broken, 2 bad input, 1 internal error)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


# Internal signals: raised and caught inside kernelcheck, never shown as they are (the catcher turns each into a
# finding or a typed result). They live here with the user-facing errors, one home for what kernelcheck raises.


class LayoutError(RuntimeError):
    """A name this kernels generation expects is not where kernels keeps it (a newer or a patched kernels):
    integrations/kernels_api turns it into a finding."""


class KernelsUnusable(RuntimeError):
    """No adapter fits the installed kernels (kernels_api.Unsupported): the resolution says so, never exit 1."""


class UnresolvedHost(OSError):
    """The Hub's host name did not resolve (no DNS here, or a wrong HF_ENDPOINT): no wait would help. `host`:
    the name that did not resolve ("" when the retries did not show it)."""

    def __init__(self, message: str, host: str = "") -> None:
        super().__init__(message)
        self.host = host


class BackwardFailed(Exception):
    """verify: a layer's forward ran and its backward raised; `original` is what it raised."""

    def __init__(self, original: BaseException):
        super().__init__(str(original))
        self.original = original


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: the command stopped before its verdict. Exit 128 + the signal number (130 for
    SIGINT, 143 for SIGTERM: what a shell reports for a process ended by that signal). A KeyboardInterrupt,
    so `except Exception` never swallows it and every `finally` and cleanup on the way out runs.

    `detail` says what the interruption left (install: nothing changed, rolled back, or completed)."""

    def __init__(self, signum: int = 2, detail: str = ""):
        super().__init__(f"signal {signum}")
        self.signum = int(signum)
        self.detail = detail

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def signal_name(self) -> str:
        import signal

        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @classmethod
    def of(cls, exc: BaseException, detail: str = "") -> Interrupted:
        """The same interruption with `detail` (a plain KeyboardInterrupt is SIGINT's)."""
        signum = exc.signum if isinstance(exc, Interrupted) else 2
        return cls(signum, detail or (exc.detail if isinstance(exc, Interrupted) else ""))
