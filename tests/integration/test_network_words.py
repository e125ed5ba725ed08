"""The integration half of tests/unit/test_network_words.py: processes, pip or builds (the in-process tests
are there).

What a user reads when the Hub cannot be reached: a name that does not resolve is said as such, at once,"""

from __future__ import annotations

import pytest

from tests.unit.test_network_words import (  # helpers and fixtures of the in-process half
    _kc,
)


@pytest.mark.integration
def test_an_unresolvable_hub_host_is_named_by_doctor(tmp_path) -> None:
    code, out, err = _kc(["doctor", "--model", "someorg/some-model"], tmp_path)  # .invalid never resolves (RFC 6761)
    assert code == 2 and "could not resolve the host hub.invalid" in err \
        and "no answer within" not in err  # wording: renderer test (exit-2 message)


@pytest.mark.integration
def test_a_hub_prefetch_dry_run_plans_or_skips_and_never_says_failed(tmp_path) -> None:
    import json

    wh = tmp_path / "wh"
    wh.mkdir()
    code, out, err = _kc(["install", "--model", "qwen3.8-27b", "--source", "hub", "--arch", "9.0", "--dry-run",
                          "--wheelhouse", str(wh), "--json"], tmp_path)
    rep = json.loads(out)
    actions = {s["action"] for s in rep["plan"]}
    assert actions and actions <= {"skipped", "planned", "cached", "missing", "local"}, rep["plan"]
    assert "skipped" in actions and code == 3 and rep["exit_code"] == 3 and not any(wh.iterdir())
    assert any(f["id"] == "hub-prefetch-skipped" for f in rep["findings"])
