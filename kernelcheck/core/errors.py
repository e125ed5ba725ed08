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
