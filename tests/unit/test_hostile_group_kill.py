"""core/lifeline.py's decisions, in-process (the real kills: tests/integration/test_hostile_group_kill.py): a
parent-death signal is asked for only from the main thread (its end would kill the child early otherwise), and a
lock record names a child to end only while that very process (same pid, same start time) still runs."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from kernelcheck.core import lifeline


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_parent_death_signal_is_asked_for_from_the_main_thread_only() -> None:
    assert callable(lifeline.preexec())
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(lifeline.preexec()))
    worker.start()
    worker.join()
    assert seen == [None]


def test_a_lock_record_names_only_live_children_with_their_start_time() -> None:
    parent = os.getppid()
    started = lifeline.start_time(parent)
    assert started is not None
    record = f"pid 1 since 00:00:00\nchild {parent} {started}\nchild {parent} 1\nchild {os.getpid()} " \
             f"{lifeline.start_time(os.getpid())}\nchild x y\nnot a line\n"
    assert lifeline.orphans(record) == [parent]  # a reused pid (other start time) and this process: never


def test_note_child_writes_into_every_held_lock(tmp_path: Path) -> None:
    with open(tmp_path / "a", "a+", encoding="utf-8") as a, open(tmp_path / "b", "a+", encoding="utf-8") as b:
        lifeline.hold(a)
        lifeline.hold(b)
        try:
            lifeline.note_child(os.getpid())
        finally:
            lifeline.release(a)
            lifeline.release(b)
        lifeline.note_child(os.getpid())  # released: nothing more written
    for f in ("a", "b"):
        assert (tmp_path / f).read_text().splitlines() == [f"child {os.getpid()} {lifeline.start_time(os.getpid())}"]
