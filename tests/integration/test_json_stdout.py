"""--json: stdout holds the report alone, even when third-party code prints to stdout while the command runs.

On the H200, TileLang's logger (a StreamHandler on sys.stdout) printed "TileLang begins to compile kernel ..." before
verify's JSON, so `kernelcheck verify --json | jq` failed (docs/measurements/2026-12-04-h200-differential-c66f13f,
verify-train.json). The GPU differential checks the real case; this runs the same guard in a real process with a logger
set up the way TileLang sets up its own, and a C-level write to fd 1."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

_PROGRAM = textwrap.dedent("""
    import logging, os, sys
    import click
    from kernelcheck.cli.common import emit, guarded
    noisy = logging.getLogger("tilelang-like")
    noisy.addHandler(logging.StreamHandler(sys.stdout))  # as tilelang/env.py does, bound at import
    noisy.propagate = False

    @click.command()
    @click.option("--json", "as_json", is_flag=True)
    @guarded("doctor")
    def cmd(as_json):
        noisy.warning("TileLang begins to compile kernel `kernel`")
        print("a print from a library")
        os.write(1, b"a C-level write to fd 1\\n")
        emit(json.dumps({"verdict": "ready"}) if as_json else "verdict: ready", is_json=as_json)
        return 0

    import json
    cmd()
""")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROGRAM, *args], capture_output=True, text=True, timeout=120)


def test_with_json_what_libraries_print_goes_to_stderr_and_stdout_is_the_report() -> None:
    res = _run("--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"verdict": "ready"}  # nothing before or after the report
    said = res.stderr.splitlines()
    assert {"TileLang begins to compile kernel `kernel`", "a print from a library",
            "a C-level write to fd 1"} <= set(said)


def test_without_json_stdout_is_left_as_it_is() -> None:
    res = _run()
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "verdict: ready" \
        and "a print from a library" in res.stdout.splitlines()  # wording: the library's own print


def test_a_command_that_prints_its_own_json_reaches_stdout() -> None:
    # `models --json` prints its listing itself: it must go through the release, not to the reserved stderr
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "models", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["command"] == "models"
