"""Property-based fuzzing of the readers of files the environment provides: the install manifest, a
KERNELCHECK_MATRIX_DIR copy's files and alias configs, the team's measured steps, and the values a user types
(--torch/--cuda/--python, --batching). The property: any input is read or refused as BadInput, never another
exception (exit 1), within Hypothesis' deadline; what is read has the types its readers use."""

from __future__ import annotations

import json
import math
import shutil
import tomllib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelcheck.core import manifest, matrix, matrix_shape
from kernelcheck.core.errors import BadInput
from kernelcheck.core.targets import parse_target
from kernelcheck.doctor import cost
from kernelcheck.padding.waste import Rule

FUZZ = settings(max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
REPO = Path(__file__).resolve().parents[2]

_scalar = st.none() | st.booleans() | st.integers(-10, 10 ** 20) | st.floats() | st.text(max_size=8)
_json = st.recursive(_scalar, lambda kids: st.lists(kids, max_size=4)
                     | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=15)
_entry_keys = st.sampled_from(["distribution", "version", "source", "wheel", "so_arches", "torch_mm", "nvcc",
                               "target_arches", "other"])
_entry = st.dictionaries(_entry_keys, _scalar | st.lists(_scalar, max_size=3), max_size=5)
_manifest = st.fixed_dictionaries({"packages": st.dictionaries(st.text(max_size=10), _entry | _json, max_size=4)})


def _bytes_of(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


@FUZZ
@given(data=st.binary(max_size=200) | _json.map(_bytes_of) | _manifest.map(_bytes_of))
def test_any_manifest_is_read_typed_or_refused(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "manifest.json"
    p.write_bytes(data)
    try:
        got = manifest.parse(data, p)
    except BadInput as exc:
        assert str(p) in exc.message
        return
    for entry in got["packages"].values():  # what doctor/drift.py and built_nvcc take, with their types
        assert isinstance(entry, dict)
        assert entry.get("nvcc") is None or isinstance(entry["nvcc"], str)
        assert all(isinstance(a, str) for a in entry.get("so_arches") or [])


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | str):
        return json.dumps(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"x"'


_toml_scalar = st.booleans() | st.integers(-5, 10 ** 6) | st.floats() | st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'), max_size=6)
_tables = st.sampled_from(["families.gated_deltanet", "model_types.qwen3_5", 'aliases."qwen3.8-27b"',
                           "attention.sdpa", "tokens", "step", "step.tokens", "tolerance", "benchmark", "tiny",
                           "capabilities", "guard", "modes.flash", "functions.causal_conv1d_fn"])
_keys = st.sampled_from(["functions", "family", "module", "id", "config", "package", "tiny", "full", "known",
                         "warmup", "timed", "tokens", "bfloat16", "file", "text", "passes", "summary", "needs",
                         "layer", "extra"])
_edit = st.tuples(_tables, _keys, _toml_scalar | st.lists(_toml_scalar, max_size=3))


@settings(max_examples=40, deadline=10_000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["models.toml", "verify.toml", "gpus.toml", "packing.toml", "verified.toml"]),
       edits=st.lists(_edit, min_size=1, max_size=3), drop=st.booleans())
def test_any_edit_of_a_matrix_file_is_loaded_or_refused_naming_it(tmp_path_factory, name: str, edits: list,
                                                                    drop: bool) -> None:
    root = tmp_path_factory.mktemp("m")
    shutil.copytree(REPO / "matrix", root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    text = "" if drop else (root / name).read_text()
    text += "".join(f"\n[{t}]\n{k} = {_toml_value(v)}\n" for t, k, v in edits)
    (root / name).write_text(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        data = None
    try:
        got = matrix_shape.read_toml(root / name)
        matrix._checked_root.cache_clear()
        matrix._load_matrix.cache_clear()
        matrix._checked_root(root)
    except BadInput as exc:
        assert str(root) in exc.message
        return
    assert data is not None and repr(got) == repr(data)  # repr: a NaN the edit wrote equals itself


@FUZZ
@given(data=st.binary(max_size=200) | _json.map(_bytes_of)
       | st.fixed_dictionaries({"model_type": _scalar}, optional={"bound_tokens_per_s": _scalar,
                                                                  "reference_tokens_per_s": _scalar,
                                                                  "gpu": _scalar}).map(_bytes_of))
def test_any_measurements_line_is_read_with_usable_numbers_or_refused(tmp_path: Path, data: bytes) -> None:
    rec = tmp_path / "m.jsonl"
    rec.write_bytes(data + b"\n")
    try:
        got = cost.read_record(rec)
    except BadInput as exc:
        assert str(rec) in exc.message
        return
    for m in got:  # what cost.finding divides by and prints
        for key in ("bound_tokens_per_s", "reference_tokens_per_s"):
            assert math.isfinite(m[key]) and m[key] > 0
        cost.finding(m, [], "qwen3.8-27b")


_version_text = st.text(alphabet="0123456789.٢١٠９-+ a", max_size=8) | st.from_regex(r"[0-9]{1,3}\.[0-9]{1,3}",
                                                                                     fullmatch=True)


@FUZZ
@given(torch_v=st.none() | _version_text, cuda_v=st.none() | st.just("cpu") | _version_text,
       python_v=st.none() | _version_text)
def test_any_target_is_parsed_to_ascii_versions_in_range_or_refused(torch_v, cuda_v, python_v) -> None:
    try:
        t = parse_target(torch_v, cuda_v, python_v)
    except BadInput:
        return
    for v in (t.torch, t.cuda or None, t.python):
        assert v is None or (v.isascii() and v.replace(".", "").isdigit())
    if t.torch:
        assert t.torch.startswith("2.")


@FUZZ
@given(text=st.text(max_size=30) | st.tuples(st.sampled_from(["budget", "batch", "packing"]),
                                              st.integers(-5, 10 ** 30).map(str) | st.text(max_size=5))
       .map(lambda kv: f"{kv[0]}:{kv[1]}"))
def test_any_batching_rule_is_parsed_to_a_bounded_int_or_refused(text: str) -> None:
    try:
        rule = Rule.parse(text)
    except BadInput:
        return
    assert 0 < rule.value <= 10 ** 12


_segment = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), min_size=1,
                   max_size=300)


@FUZZ
@given(parts=st.lists(_segment, min_size=1, max_size=3), under=st.sampled_from(["", "f", "/proc", "/sys"]))
def test_any_named_path_is_checked_or_refused(tmp_path: Path, parts: list[str], under: str) -> None:
    from kernelcheck.core import paths

    (tmp_path / "f").write_text("")
    base = tmp_path / under if under == "f" else Path(under) if under else tmp_path
    path = str(base.joinpath(*parts))
    try:
        got = paths.checked(path, "--model")
    except BadInput as exc:
        assert exc.message.startswith("--model")
        return
    assert str(got) == path or got == Path(path)
