"""Every KERNELCHECK_* value is read once, at the start of every command (core/settings.py check_environ): a value
kernelcheck cannot read is exit 2 before anything runs, never a silent default or a failure when it is first used;
and every boolean variable reads the same yes/no words."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core import settings
from kernelcheck.core.errors import BadInput
from kernelcheck.core.settings import Settings

BAD = [("KERNELCHECK_NETWORK_TIMEOUT", "nan"), ("KERNELCHECK_NETWORK_TIMEOUT", "1e9"),
       ("KERNELCHECK_IMPORT_TIMEOUT", "abc"), ("KERNELCHECK_IMPORT_TIMEOUT", "-5"),
       ("KERNELCHECK_IMPORT_TIMEOUT", "inf"), ("KERNELCHECK_IMPORT_CACHE", "maybe"),
       ("KERNELCHECK_PROGRESS", "quiet"), ("KERNELCHECK_STEP_PROFILED", "abc"),
       ("KERNELCHECK_STEP_PROFILED", "1000000000"), ("KERNELCHECK_STEP_PROFILED", "0"),
       ("KERNELCHECK_DEBUG", "please"), ("KERNELCHECK_OFFLINE", "sometimes"), ("KERNELCHECK_VERBOSE", "2"),
       ("KERNELCHECK_PROOF_DIR", "baked/kernelcheck")]


@pytest.mark.parametrize("name,value", BAD)
def test_a_value_kernelcheck_cannot_read_is_exit_2_at_start_of_a_command_that_never_uses_it(
        name: str, value: str) -> None:
    """`models` waits on no network, imports nothing and runs no step: before, each of these ran it (exit 0)."""
    res = CliRunner().invoke(main, ["models", "-q"], env={name: value})
    assert res.exit_code == 2, res.output
    assert f"{name}={value!r}" in res.output and res.output.count("\n") == 1  # one paragraph naming the variable


@pytest.mark.parametrize("name,value", BAD)
def test_check_environ_names_each_bad_variable(name: str, value: str) -> None:
    with pytest.raises(BadInput) as got:
        settings.check_environ({name: value, "KERNELCHECK_HOME": "/tmp/x", "KERNELCHECK_TEST_CACHE": "anything"})
    assert name in got.value.message and got.value.exit_code == 2


@pytest.mark.parametrize("env", [{}, {"KERNELCHECK_NETWORK_TIMEOUT": "2.5", "KERNELCHECK_IMPORT_TIMEOUT": "60",
                                      "KERNELCHECK_STEP_PROFILED": "3", "KERNELCHECK_PROGRESS": "off",
                                      "KERNELCHECK_IMPORT_CACHE": "No", "KERNELCHECK_DEBUG": "",
                                      "KERNELCHECK_VERBOSE": "yes", "KERNELCHECK_OFFLINE": "0",
                                      "KERNELCHECK_PROOF_DIR": "/opt/jit-cache/kernelcheck"}])
def test_good_values_pass(env: dict[str, str]) -> None:
    settings.check_environ(env)


@pytest.mark.parametrize("value,on", [("1", True), ("on", True), ("YES", True), ("true", True), ("y", True),
                                      ("0", False), ("off", False), ("no", False), ("false", False), ("n", False),
                                      ("", False)])
def test_booleans_read_one_way(value: str, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """KERNELCHECK_DEBUG=0 was on (any non-empty value) and KERNELCHECK_VERBOSE=yes off (only "1" was on)."""
    s = Settings.from_environ({"KERNELCHECK_DEBUG": value, "KERNELCHECK_VERBOSE": value, "KERNELCHECK_OFFLINE": value})
    assert (s.debug, s.verbose, s.offline) == (on, on, on)
    from kernelcheck.doctor import proofcache
    from kernelcheck.report import progress

    monkeypatch.setenv("KERNELCHECK_IMPORT_CACHE", value)
    monkeypatch.setenv("KERNELCHECK_PROGRESS", value)
    progress.set_quiet(False)
    assert proofcache.enabled() is (on or value == "") and progress.enabled() is (on or value == "")


def test_the_numbers_are_read_as_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.doctor import imports

    monkeypatch.setenv("KERNELCHECK_IMPORT_TIMEOUT", "0")  # was read as the default 300 in silence
    with pytest.raises(BadInput):
        imports.import_timeout()
    monkeypatch.setenv("KERNELCHECK_IMPORT_TIMEOUT", "42")
    assert imports.import_timeout() == 42.0
    monkeypatch.delenv("KERNELCHECK_IMPORT_TIMEOUT")
    assert imports.import_timeout() == 300.0
    monkeypatch.setenv("KERNELCHECK_STEP_PROFILED", "1000000000")
    with pytest.raises(BadInput):
        settings.count("KERNELCHECK_STEP_PROFILED")
    monkeypatch.setenv("KERNELCHECK_STEP_PROFILED", "4")
    assert settings.count("KERNELCHECK_STEP_PROFILED") == 4
