"""The integration half of tests/unit/test_config_fuzz.py: processes, pip or builds (the in-process tests
are there).

Hostile config.json files are bad input: exit 2 with a message, never 1, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.envs import run


@pytest.mark.integration
def test_binary_config_json_is_exit_2_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00binary")
    res = run(["doctor", "--model", str(tmp_path)])
    assert res.returncode == 2, res.stderr
    assert "is not UTF-8 text" in res.stderr \
        and "Traceback" not in res.stderr  # wording: renderer test (exit-2 message)


@pytest.mark.integration
def test_text_config_that_is_not_an_object_is_exit_2_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5", "text_config": "oops"}))
    res = run(["doctor", "--model", str(tmp_path)])
    assert res.returncode == 2, res.stderr
    assert '"text_config" is a JSON str, not an object' in res.stderr \
        and "Traceback" not in res.stderr  # wording: renderer test (exit-2 message)
