"""Test lanes and paths.

Two lanes, both run by CI (.ci/run):
- fast (tests/unit, `pytest -m "not integration"`): decisions in-process with explicit inputs (seconds);
- integration (tests/integration, `pytest -m integration`): real processes, real venvs and pip, real builds.

The folder is the lane: tests/unit holds the fast lane, tests/integration the integration lane (marked
`integration` here, so `-m` picks them); the helpers both use (environments, fixtures, programs, data) stay in
tests/.
"""

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

HERE = Path(__file__).resolve().parent
# The fuzzers (hypothesis) explore anew on every local run and keep what fails in .hypothesis/; under CI (CI=true)
# they run the same derandomized examples every time, so a gate's result never depends on the draw. A case a local
# run finds is pinned with @example next to its test.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")
# The fast lane draws at most FAST_EXAMPLES examples per property (each test's own max_examples is its thorough
# count): `pytest --hypothesis-profile thorough`, or KERNELCHECK_TEST_THOROUGH=1 in the environment, runs every
# property at its own count.
FAST_EXAMPLES = 25
hypothesis_settings.register_profile("thorough", parent=hypothesis_settings.get_profile("ci" if os.environ.get("CI")
                                                                                        else "default"))
# This checkout first (also in git worktrees): its kernelcheck, and the test helpers as the package `tests`
# (`from tests import envs`, `from tests.kcfixtures import ...`).
sys.path.insert(0, str(HERE.parent))

# Piped text is wrapped to 100 columns for people (report/terminal.py). The tests that read a command's stdout
# match phrases of one logical line, so their processes get a wide $COLUMNS; tests/unit/test_terminal.py and
# tests/unit/test_doc_samples.py unset it to check the 100-column text itself. pytest keeps its own width.
WIDE = "10000"


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists
def pytest_configure(config: pytest.Config) -> None:
    import shutil

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter._tw.fullwidth = shutil.get_terminal_size().columns
    os.environ["COLUMNS"] = WIDE
    import tests.sources  # noqa: F401 - git's list of the repository's files, made before any test refuses processes

LANES = {"unit": "fast", "integration": "integration"}


def lane_of(parts: tuple[str, ...], marked_integration: bool) -> str | None:
    """The lane of a test from its path under tests/ (its folder) and its markers; None: it is in the wrong place
    (outside both folders, or marked integration/slow in tests/unit)."""
    lane = LANES.get(parts[0]) if len(parts) > 1 else None
    if lane == "fast" and marked_integration:
        return None
    return lane


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = []
    for item in items:
        parts = Path(str(item.path)).resolve().relative_to(HERE).parts
        marked = any(item.get_closest_marker(m) for m in ("integration", "slow"))
        lane = lane_of(parts, marked)
        if lane == "fast" and not thorough(config.getoption("hypothesis_profile", None), os.environ):
            _fewer_examples(item)
        if lane == "integration":
            item.add_marker(pytest.mark.integration)
        elif lane is None:
            wrong.append(item.nodeid)
    if wrong:
        raise pytest.UsageError(
            "tests outside their lane's folder: tests/unit holds the in-process fast lane, tests/integration the "
            "tests that launch processes, pip or builds (a test marked slow or integration goes there): "
            + ", ".join(wrong[:10]))


def thorough(profile: str | None, environ: Mapping[str, str]) -> bool:
    """Whether the fast lane's properties run at their own counts: `--hypothesis-profile thorough`, or
    KERNELCHECK_TEST_THOROUGH=1 (a CI job or a scheduled run that cannot change pytest's arguments)."""
    return profile == "thorough" or environ.get("KERNELCHECK_TEST_THOROUGH", "") in ("1", "true", "yes", "on")


def _fewer_examples(item: pytest.Item) -> None:
    """A hypothesis property of the fast lane runs at most FAST_EXAMPLES examples (hypothesis reads the settings
    stored on the test when it runs)."""
    fn = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    own = getattr(fn, "_hypothesis_internal_use_settings", None)
    if own is not None and own.max_examples > FAST_EXAMPLES:
        fn._hypothesis_internal_use_settings = hypothesis_settings(own, max_examples=FAST_EXAMPLES)


@pytest.fixture(autouse=True)
def _environment_restored() -> object:
    """Each test starts from the test run's environment: an in-process command with --verbose or
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
