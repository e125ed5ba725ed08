"""Hostile config.json files are bad input: exit 2 with a message, never 1, never a traceback.

The property runs in-process against the resolver doctor uses (bounded examples, no subprocess per
example); two real CLI runs pin the exit code and the message for the cases that used to crash."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelcheck.core import matrix, models
from kernelcheck.core.errors import BadInput
from kernelcheck.integrations import transformers_models

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                     max_leaves=12)
_keys = st.sampled_from(["model_type", "text_config", "_attn_implementation", "attn_implementation",
                         "architectures", "layer_types"])
_model_type = st.sampled_from(["qwen3_5", "mamba2", "qwen3_5_text", "glm5_next_text", "llama", "", "nope"]) | _json
_config = st.dictionaries(_keys, _json, max_size=5).flatmap(
    lambda d: st.fixed_dictionaries({"model_type": _model_type}).map(lambda m: {**d, **m}))
_payload = (_config.map(lambda c: json.dumps(c).encode())
            | _json.map(lambda c: json.dumps(c).encode())
            | st.binary(max_size=64)
            | st.integers(min_value=1, max_value=3000).map(lambda n: b"[" * n + b"]" * n))


def _resolve(folder: Path, data: bytes) -> None:
    (folder / "config.json").write_bytes(data)
    try:
        model = transformers_models.resolve(str(folder), m=matrix.load())  # as --model resolves it
        models.needs(model, m=matrix.load())  # what doctor reads next
        _ = model.text_config.get("model_type")
    except BadInput as exc:
        assert str(exc).strip(), "a bad-input error must carry a message"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_payload)
def test_hostile_config_json_is_bad_input_or_resolves(tmp_path: Path, data: bytes) -> None:
    _resolve(tmp_path, data)  # any other exception fails the test: it would reach the user as exit 1
