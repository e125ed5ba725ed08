"""A gate never lies: bad --arch values, a forgotten --model, hub's own scope, closed pipes, --junit paths.

Decisions are tested in-process (the --arch parser, the CLI through click's runner); the closed pipe needs
a real process and a real pipe.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.core.gpu import Capability, known, parse_arch

REPO = Path(__file__).resolve().parents[2]


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, args, env={"HF_HUB_OFFLINE": "1", **(env or {})}, catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("text,sm", [("9.0", "sm_90"), ("sm_90", "sm_90"), ("90", "sm_90"), ("9.0a", "sm_90"),
                                     ("10.3", "sm_103"), ("sm_120", "sm_120"), ("compute_86", "sm_86")])
def test_capability_spellings_round_trip(text: str, sm: str) -> None:
    cap = Capability.parse(text)
    assert cap.sm == sm and Capability.parse(cap.sm) == cap and Capability.parse(cap.dotted) == cap


@pytest.mark.parametrize("bad", ["99.9", "999", "90.0", "1.0", "9.9", "sm_99"])
def test_arch_that_no_gpu_has_is_bad_input(bad: str) -> None:
    with pytest.raises(BadInput, match="no NVIDIA GPU has"):
        parse_arch(bad, m=matrix.load())


def test_known_capabilities_come_from_the_matrix() -> None:
    caps = {c.dotted for c in known(m=matrix.load())}
    assert {"8.0", "8.6", "8.9", "9.0", "10.0", "12.0"} <= caps and "9.9" not in caps


@pytest.mark.parametrize("command", [["doctor"], ["hub"], ["install", "--model", "qwen3.8-27b", "--dry-run"]])
@pytest.mark.parametrize("bad", ["99.9", "999", "90.0"])
def test_every_command_rejects_an_impossible_arch_with_exit_2(command: list[str], bad: str) -> None:
    code, _, err = invoke([*command, "--arch", bad])
    assert code == 2, err
    assert "no NVIDIA GPU has" in err and "Traceback" not in err  # wording: renderer test


def test_unwritable_junit_is_found_before_the_run(tmp_path: Path) -> None:
    code, out, err = invoke(["doctor", "--model", "qwen3.8-27b", "--junit", "/proc/no/such.xml"])
    assert code == 2 and "--junit" in err and "nothing was run" in err  # wording: renderer test
    assert out == ""  # the report did not run
    code, _, err = invoke(["doctor", "--model", "qwen3.8-27b", "--junit", str(tmp_path)])
    assert code == 2 and "is a directory" in err  # wording: renderer test; click says so itself


# --- an unreachable Hub: bounded, and never READY (cases 3 and 14) ---------------------------------------------


def _timed(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    import time

    from tests.envs import run

    t0 = time.monotonic()
    res = run(["--network-timeout", "1", *args], env=env, timeout=120)
    return res, time.monotonic() - t0
