"""matrix/breakages.toml is validated as it is read: a bad entry is bad input (exit 2) in one paragraph that names
the file, the entry and the key, never a KeyError or a rule that silently never matches."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput

SOURCE = Path("/etc/kc/breakages.toml")
FUNCTIONS = frozenset({"chunk_gated_delta_rule", "causal_conv1d_fn"})
PACKAGES = frozenset({"fla", "causal_conv1d"})  # packages.toml's tables: each one's name is a version key
GOOD = {
    "breakage": [{
        "id": "fla-640-wrong-grads", "title": "t", "severity": "broken", "functions": ["chunk_gated_delta_rule"],
        "when": {"gpu_capability": ["9.0"], "triton": ">=3.4.0,<3.7.1", "mode": "train", "cuda_gpu": True},
        "message": "m", "fix": "pip install tilelang", "reference": "https://example.org/640",
        "remedies": [{"package": "tilelang", "spec": "tilelang", "kind": "add", "why": "w"}],
    }],
    "import_error": [{"id": "undef", "pattern": "undefined symbol", "title": "t", "message": "m", "fix": "f",
                      "reference": "r"}],
}


def _error(table: dict) -> str:
    with pytest.raises(BadInput) as got:
        matrix.breakages_from(table, SOURCE, FUNCTIONS, PACKAGES)
    assert got.value.exit_code == 2 and "\n" not in str(got.value)  # wording: renderer test (exit-2 message)
    return str(got.value)


def _with(path: tuple, value: object) -> dict:
    table = copy.deepcopy(GOOD)
    node = table
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return table


def test_a_good_table_is_typed_rule_by_rule():
    breakages, import_errors, runtime_errors = matrix.breakages_from(GOOD, SOURCE, FUNCTIONS, PACKAGES)
    assert [b.id for b in breakages] == ["fla-640-wrong-grads"]
    assert breakages[0].functions == ("chunk_gated_delta_rule",)
    assert breakages[0].remedies[0]["kind"] == "add"
    assert [r.id for r in import_errors] == ["undef"] and runtime_errors == ()


@pytest.mark.parametrize(("path", "value", "says"), [
    (("breakage", 0, "when", "torhc"), ">=2.6", '[[breakage]] 1 (id "fla-640-wrong-grads") when.torhc: '
                                                "'torhc' is not a condition kernelcheck knows"),
    (("breakage", 0, "when", "mamba_ssm"), ">=2", "when.mamba_ssm: 'mamba_ssm' is not a condition kernelcheck knows"),
    (("breakage", 0, "when", "causal_conv1d"), "1.7", "when.causal_conv1d: 'causal_conv1d' = \"1.7\" is not a version"),
    (("breakage", 0, "when", "triton"), "3.4 or newer", "when.triton: 'triton' = \"3.4 or newer\" is not a version"),
    (("breakage", 0, "when", "bound"), "fla", "when.bound: 'bound' must be a list of strings"),
    (("breakage", 0, "when", "cuda_gpu"), "yes", "when.cuda_gpu: 'cuda_gpu' must be true or false"),
    (("breakage", 0, "when", "used"), "causal_conv1d_fn", "when.used: 'used' must be a list of strings"),
    (("breakage", 0, "when", "used"), ["selective_scan_fm"], "when.used: selective_scan_fm: not in functions.toml"),
    (("breakage", 0, "severity"), "fatal", "severity: 'fatal' is none of broken, fallback, warning"),
    (("breakage", 0, "functions"), ["chunk_gated_delta_rul"],
     "functions: chunk_gated_delta_rul: not in functions.toml"),
    (("breakage", 0, "fix"), None, "fix: missing, or not a non-empty string"),
    (("breakage", 0, "remedies", 0, "kind"), "upgrade", "remedies[0].kind: 'upgrade' is none of add, change, image"),
    (("import_error", 0, "pattern"), "undefined (symbol", "[[import_error]] 1.pattern: not a regular expression"),
])
def test_a_bad_entry_names_the_file_the_entry_and_the_key(path: tuple, value: object, says: str):
    message = _error(_with(path, value))
    assert message.startswith(f"{SOURCE}: ") and says in message, message


def test_a_package_of_packages_toml_is_a_version_key():
    table = _with(("breakage", 0, "when", "causal_conv1d"), ">=1.6,<1.8")
    breakages, _, _ = matrix.breakages_from(table, SOURCE, FUNCTIONS, PACKAGES)
    assert breakages[0].when["causal_conv1d"] == ">=1.6,<1.8"


def test_a_second_rule_with_the_same_id_is_refused():
    table = copy.deepcopy(GOOD)
    table["breakage"].append(copy.deepcopy(GOOD["breakage"][0]))
    assert '[[breakage]] 2 (id "fla-640-wrong-grads") id: used by an earlier [[breakage]]' \
        in _error(table)  # wording: renderer test (exit-2 message)


def test_an_import_error_with_a_missing_key_is_refused():
    table = copy.deepcopy(GOOD)
    del table["import_error"][0]["fix"]
    assert "[[import_error]] 1: needs exactly the string keys id, pattern, title, message, fix, reference" \
        in _error(table)  # wording: renderer test (exit-2 message)


def test_the_shipped_breakages_file_passes_its_own_validation():
    m = matrix.load()
    assert len(m.breakages) >= 10 and all(b.severity in ("broken", "fallback", "warning") for b in m.breakages)
