"""Usage errors before any probe (each command's `check`, commands/<command>.py): a mistyped model, spec, packing
mode or file is exit 2 before `environment.probe()` runs. In-process: the probe is replaced by one that fails the test.
One real invocation, timed, is in tests/integration/test_early.py."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core import environment


@pytest.fixture
def no_probe(monkeypatch):
    def probe(*_a, **_k):
        raise AssertionError("environment.probe() ran before the usage error was found")

    monkeypatch.setattr(environment, "probe", probe)


USAGE_ERRORS = [
    ["doctor", "--model", "qwen3.8-72b"],
    ["doctor", "--model", "qwen3.8-72b", "--json"],
    ["install", "--model", "qwen3.8-72b", "--dry-run"],
    ["verify", "--model", "qwen3.8-72b"],
    ["hub", "--model", "qwen3.8-72b"],
    ["doctor", "--model", "./no-such-model-folder"],
    ["doctor", "--upgrade", "transformers=5.24.0"],
    ["doctor", "--upgrade", "transformers==5.25.0", "kernels=>0.19"],
    ["doctor", "--upgrade", "-r", "no-such-requirements.txt"],
    ["doctor", "--upgrade", "./no-such-wheel-1.0-py3-none-any.whl"],
    ["doctor", "--model", "qwen3.8-27b", "--packing", "bogus"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a))
def test_a_usage_error_is_exit_2_before_the_probe(no_probe, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert "AssertionError" not in res.output  # wording: renderer test (the probe never ran)


def test_a_single_equals_spec_names_the_double_equals_it_means(no_probe, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["doctor", "--upgrade", "transformers=5.24.0"])
    assert res.exit_code == 2
    assert "transformers==5.24.0?" in res.output  # wording: the one test of this message


def test_valid_specs_pass_the_early_check(tmp_path):
    from kernelcheck.forecast.resolve import pip_args

    req = tmp_path / "req.txt"
    req.write_text("transformers==5.25.0\n")
    pip_args(["transformers==5.25.0", "kernels>=0.19", "torch[cuda]~=2.11", "-r", str(req), f"-c{req}",
                       "https://example.org/x-1.0-py3-none-any.whl"])


def test_a_hub_id_is_left_to_the_command_which_may_need_the_network():
    from kernelcheck.core import matrix, models

    assert models.resolves_remotely("someone/some-model", m=matrix.load())
    assert not models.resolves_remotely("qwen3.8-72b", m=matrix.load())
    assert not models.resolves_remotely("Qwen/Qwen3.8-27B", m=matrix.load())  # an alias's id: from the matrix
    assert not models.resolves_remotely("./folder", m=matrix.load())


@pytest.mark.parametrize(("args", "named", "not_named"), [
    (["doctor", "--upgrade"], "--upgrade needs", ("--if-worse", "--wheelhouse", "--offline")),
    (["doctor", "--if-worse"], "--if-worse applies", ("--wheelhouse", "--offline")),
    (["doctor", "--offline"], "--offline applies", ("--if-worse", "--wheelhouse")),
])
def test_a_forecast_flag_without_upgrade_names_only_the_flags_given(no_probe, args, named, not_named):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2
    assert named in res.output  # wording: the one test of this message
    assert not any(flag in res.output for flag in not_named)
