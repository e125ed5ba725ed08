"""A user's first hour: progress on long steps, usage errors at once, target planning for install.

In-process: the progress helper on a fake terminal, click's runner for the CLI, Environment values for the
target build. The dry run with real pip downloads is in tests/integration/test_first_hour_integration.py.
"""

from __future__ import annotations

import io
import time

import pytest
from click.testing import CliRunner

from kernelcheck.cli.hub import hub
from kernelcheck.cli.install import install
from kernelcheck.cli.main import main
from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.core.targets import TargetBuild, parse_target
from kernelcheck.install.target_env import for_target, triton_pins
from kernelcheck.report import progress
from tests.environments import make_env


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_step_shows_a_line_with_its_seconds_on_a_terminal_and_erases_it_after():
    out = _Tty()
    with progress.working("doctor: proving imports", stream=out, delay=0.05, tick=0.05):
        time.sleep(0.3)
    text = out.getvalue()
    assert "\r\x1b[Kdoctor: proving imports ... 0 s" in text  # wording: renderer test
    assert text.endswith("\r\x1b[K")  # nothing left behind on the terminal


def test_a_short_step_prints_nothing_and_a_log_gets_plain_periodic_lines():
    out = _Tty()
    with progress.working("quick", stream=out, delay=5):
        pass
    assert out.getvalue() == ""
    log = io.StringIO()  # not a TTY: CI logs get whole lines, no carriage returns
    with progress.working("pip download fla-core", stream=log, delay=0.05, every=0.1, detail=lambda: "3 entries",
                          announce=True):
        time.sleep(0.4)
    lines = log.getvalue().splitlines()
    assert lines[0] == "kernelcheck: pip download fla-core ..."  # wording: renderer test; the step's own line
    assert len(lines) >= 3 and all(ln.startswith("kernelcheck: pip download fla-core (still working, ")
                                   for ln in lines[1:])
    assert "\r" not in log.getvalue() and lines[1].endswith("; 3 entries)")  # wording: renderer test
    log = io.StringIO()  # a label that names the command already is not prefixed twice
    with progress.working("kernelcheck install: pip download einops", stream=log, delay=0.01, announce=True):
        time.sleep(0.1)
    assert log.getvalue() == "kernelcheck install: pip download einops ...\n"
    log = io.StringIO()  # a step that does not announce itself (doctor's import of torch): the periodic line only
    with progress.working("doctor: importing torch", stream=log, delay=0.01, every=5):
        time.sleep(0.1)
    assert log.getvalue() == ""


def test_quiet_and_kernelcheck_progress_0_print_no_progress(monkeypatch):
    out = _Tty()
    progress.set_quiet(True)
    try:
        with progress.working("x", stream=out, delay=0.01, tick=0.01):
            time.sleep(0.1)
    finally:
        progress.set_quiet(False)
    monkeypatch.setenv("KERNELCHECK_PROGRESS", "0")
    with progress.working("x", stream=out, delay=0.01, tick=0.01):
        time.sleep(0.1)
    assert out.getvalue() == ""


def test_verify_shape_full_without_a_gpu_is_a_usage_error_at_once():
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--shape", "full"], env={"HF_HUB_OFFLINE": "1"})
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.stderr  # its words: tests/integration/test_verify.py test_bad_input_exits_2_...
    assert time.monotonic() - t0 < 3  # was 10.7 s: after the static check and the model's import


def test_install_plans_for_an_h200_image_from_a_cpu_box():
    cpu = make_env(None, torch="2.13.0+cpu", cuda=None, triton=None, python="3.11.7", python_tag="cp311")
    env, finding = for_target(cpu, TargetBuild("2.11", "13.0", "3.12"), triton_pins(m=matrix.load()))
    assert env.torch is not None and (env.torch.version, env.torch.cuda, env.torch.cxx11abi) == \
        ("2.11.0+cu130", "13.0", True)
    assert (env.python_tag, env.triton) == ("cp312", "3.6.0")  # torch 2.11 pins triton 3.6.0 (matrix/torch.toml)
    assert finding.id == "build-target" and finding.severity == "info"
    env, finding = for_target(cpu, TargetBuild("2.12", "13.0", None), triton_pins(m=matrix.load()))
    assert env.triton is None and (finding.id, finding.severity) == ("build-target", "warning")  # triton unknown
    env, _ = for_target(cpu, parse_target(None, "cpu"), triton_pins(m=matrix.load()))
    assert env.torch is not None and env.torch.version == "2.13.0+cpu" and env.torch.cuda is None


@pytest.mark.parametrize("flags", [["--torch", "2"], ["--cuda", "13"], ["--python", "three"]])
def test_target_flags_that_are_not_major_minor_are_bad_input(flags):
    with pytest.raises(BadInput, match="is not MAJOR.MINOR"):
        parse_target(*(dict(zip(flags[::2], flags[1::2], strict=True)).get(k) for k in ("--torch", "--cuda",
                                                                                         "--python")))
    res = CliRunner().invoke(main, ["install", "--model", "qwen3.8-27b", "--dry-run", *flags])
    assert res.exit_code == 2 and "MAJOR.MINOR" in res.stderr  # wording: renderer test


def test_install_for_another_torch_is_a_plan_only():
    res = CliRunner().invoke(main, ["install", "--model", "qwen3.8-27b", "--torch", "2.11", "--cuda", "13.0"])
    assert res.exit_code == 2 and "with --dry-run" in res.stderr  # wording: renderer test


def test_hub_and_install_share_one_target_option_helper():
    def opts(cmd):
        return {p.name: (p.opts, p.metavar, p.help) for p in cmd.params if p.name in ("torch_v", "cuda_v")}

    assert opts(hub) == opts(install) and len(opts(hub)) == 2
    assert "python_v" in {p.name for p in install.params}
