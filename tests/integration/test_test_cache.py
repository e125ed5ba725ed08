"""The test cache (tests/envs.py, KERNELCHECK_TEST_CACHE): two test runs at once build an entry once, never
half each, and say on the terminal what they are filling.

Real pip and a real wheel, in a cache folder of its own; two real processes race for the same entry.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kcfixtures import make_wheel

pytestmark = pytest.mark.integration
TESTS = Path(__file__).resolve().parents[1]

BUILD = """
import sys
sys.path.insert(0, {tests!r})
from tests import envs
print(envs.site({wheel!r}))
"""


def test_two_runs_at_once_build_one_cache_entry_once(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "wh", "kc-cache-probe", "1.0", py="py3", plat="any", abi="none",
                       files={"kc_cache_probe/__init__.py": b"VALUE = 42\n" + b"# padding\n" * 20000})
    cache = tmp_path / "cache"
    env = dict(os.environ, KERNELCHECK_TEST_CACHE=str(cache))
    code = BUILD.format(tests=str(TESTS), wheel=str(wheel))
    # start_new_session: no controlling terminal, so the progress line goes to stderr, where it is read here
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, start_new_session=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    sites = {out.strip() for out, _ in outs}
    assert len(sites) == 1, sites
    site = Path(sites.pop())
    said = "".join(err for _, err in outs)
    assert said.count("[kernelcheck-tests] building test site") == 1, said  # one built it, the other waited
    assert f"in {site} (once; cached for later runs)" in said  # wording: renderer test
    assert (site / ".complete").exists() and (site / "kc_cache_probe" / "__init__.py").read_bytes().startswith(
        b"VALUE = 42")
    probe = subprocess.run([sys.executable, "-c", "import kc_cache_probe; print(kc_cache_probe.VALUE)"],
                           capture_output=True, text=True, env=dict(env, PYTHONPATH=str(site)))
    assert probe.stdout.strip() == "42", probe.stderr
    # a third run finds the entry complete: no pip, no line
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           start_new_session=True, timeout=120)
    assert again.stdout.strip() == str(site) and "[kernelcheck-tests]" not in again.stderr  # wording: renderer test
