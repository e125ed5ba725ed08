"""core/signals.held: a SIGINT/SIGTERM that lands in a held block is never lost (issue 16, case 5)."""

from __future__ import annotations

import os
import signal

import pytest

from kernelcheck.core import signals
from kernelcheck.core.errors import Interrupted


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_a_held_block_is_raised_when_it_ends(sig):
    with pytest.raises(Interrupted) as got, signals.held():
        os.kill(os.getpid(), sig)
    assert got.value.signum == sig


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_not_swallowed_by_an_import_that_fails_in_the_same_block(sig):
    # the install's probe of a broken fla-core (einops missing): the import fails while the signal is held
    with pytest.raises(Interrupted) as got, signals.held(second_interrupts=True):
        os.kill(os.getpid(), sig)
        raise ModuleNotFoundError("No module named 'einops'")
    assert got.value.signum == sig
    assert isinstance(got.value.__context__, ModuleNotFoundError)


def test_without_reraise_the_caller_gets_the_list_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    with signals.held(reraise=False) as came:
        os.kill(os.getpid(), signal.SIGTERM)
    assert came == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is before
