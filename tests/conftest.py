"""Test lanes and paths.

Two lanes, both run by CI (.ci/run):
- fast (`pytest -m "not integration"`): decisions in-process with explicit inputs (seconds);
- integration (`pytest -m integration`): real processes, real venvs and pip, real builds.

A test is in the integration lane when it carries `@pytest.mark.integration` or lives in a module listed in
INTEGRATION_MODULES below (the modules whose tests drive `python -m kernelcheck` or build package sets).
"""

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# This checkout first (also in git worktrees): its kernelcheck, and the test helpers as the package `tests`
# (`from tests import envs`, `from tests.kcfixtures import ...`).
sys.path.insert(0, str(HERE.parent))

# Piped text is wrapped to 100 columns for people (report/terminal.py). The tests that read a command's stdout
# match phrases of one logical line, so their processes get a wide $COLUMNS; tests/test_terminal.py and
# tests/test_doc_samples.py unset it to check the 100-column text itself. pytest keeps its own width.
WIDE = "10000"


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists
def pytest_configure(config: pytest.Config) -> None:
    import shutil

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter._tw.fullwidth = shutil.get_terminal_size().columns
    os.environ["COLUMNS"] = WIDE

INTEGRATION_MODULES = frozenset({
    "test_doctor", "test_hub", "test_install_cli", "test_install_wheels", "test_junit", "test_pipelines",
    "test_trace", "test_trace_gpu", "test_trace_step_gpu", "test_verify", "test_verify_step",
    "test_fleet", "test_proofcache", "test_packing", "test_install_artifacts",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module is not None else ""
        if module in INTEGRATION_MODULES or item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _environment_restored() -> object:
    """Each test starts from the session's environment: an in-process command with --verbose or
    --network-timeout hands its choice to child processes through os.environ (core/settings.set_variable),
    and that must not leak into the next test's processes."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _fast_lane_is_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast-lane test that launches a process fails at once (tests/lanes.py)."""
    if request.node.get_closest_marker("integration") is None:
        from tests.lanes import forbid_processes

        forbid_processes(monkeypatch)


@pytest.fixture
def h200_env():
    """The H200 image of the GPU runs as an Environment value (tests/environments.py make_env's defaults)."""
    from tests.environments import make_env

    return make_env()
