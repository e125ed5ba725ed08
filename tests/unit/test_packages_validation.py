"""matrix/packages.toml and functions.toml are validated as they are read: a bad entry is bad input (exit 2) in one
paragraph that names the file, the table and the key. A package's table name is its import name and the version key
breakages.toml's `when` uses for it, so it may not be a condition's name."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput

PACKAGES = Path("/etc/kc/packages.toml")
FUNCTIONS = Path("/etc/kc/functions.toml")
GOOD = {"toy_ssm": {"title": "toy-ssm", "distributions": ["toy-ssm"], "install_distribution": "toy-ssm",
                    "probe_modules": ["toy_ssm"], "devices": ["cuda"], "kind": "cuda-extension",
                    "env_prefix": "TOY_SSM", "needs": ["triton"]}}
GOOD_FN = {"toy_scan_fn": {"package": "toy_ssm", "phase": "prefill", "backward": True, "module": "toy_ssm.ops",
                           "torch_fallback": "slow_forward"}}


def _error(call, *args) -> str:
    with pytest.raises(BadInput) as got:
        call(*args)
    assert got.value.exit_code == 2 and "\n" not in str(got.value)  # wording: renderer test (exit-2 message)
    return str(got.value)


def test_a_good_package_is_typed():
    got = matrix.packages_from(GOOD, PACKAGES)["toy_ssm"]
    assert (got.name, got.distributions, got.devices, got.needs, got.env_prefix) == \
        ("toy_ssm", ("toy-ssm",), ("cuda",), ("triton",), "TOY_SSM")
    assert matrix.functions_from(GOOD_FN, FUNCTIONS, frozenset(GOOD))["toy_scan_fn"].package == "toy_ssm"


@pytest.mark.parametrize(("name", "key", "value", "says"), [
    ("toy_ssm", "devices", [], "[toy_ssm] devices: missing, or not a non-empty list of strings"),
    ("toy_ssm", "install_distribution", "toy_ssm", "[toy_ssm] install_distribution: 'toy_ssm' is not one of its"),
    ("toy_ssm", "title", None, "[toy_ssm] title: missing, or not a non-empty string"),
    ("toy_ssm", "env_prefx", "TOY", "[toy_ssm] env_prefx: not a key kernelcheck knows"),
    ("toy_ssm", "needs", "triton", "[toy_ssm] needs: must be a list of strings"),
    ("toy-ssm", None, None, "[toy-ssm]: the table's name is the package's import name"),
    ("mode", None, None, "[mode]: 'mode' is already a condition of breakages.toml `when`"),
    ("triton", None, None, "[triton]: 'triton' is already a condition"),
])
def test_a_bad_package_names_the_file_the_table_and_the_key(name: str, key: str | None, value: object, says: str):
    entry = copy.deepcopy(GOOD["toy_ssm"])
    if key is not None:
        entry[key] = value
        if value is None:
            del entry[key]
    message = _error(matrix.packages_from, {name: entry}, PACKAGES)
    assert message.startswith(f"{PACKAGES}: ") and says in message, message


@pytest.mark.parametrize(("key", "value", "says"), [
    ("package", "toy", "[toy_scan_fn] package: 'toy' is not a table of packages.toml"),
    ("phase", "train", "[toy_scan_fn] phase: 'train' is none of prefill, decode"),
    ("backward", "yes", "[toy_scan_fn] backward: must be true or false"),
    ("module", None, "[toy_scan_fn]: needs exactly the keys package, phase, backward, module, torch_fallback"),
])
def test_a_bad_function_names_the_file_the_table_and_the_key(key: str, value: object, says: str):
    entry = copy.deepcopy(GOOD_FN["toy_scan_fn"])
    entry[key] = value
    if value is None:
        del entry[key]
    message = _error(matrix.functions_from, {"toy_scan_fn": entry}, FUNCTIONS, frozenset(GOOD))
    assert message.startswith(f"{FUNCTIONS}: ") and says in message, message


def test_the_shipped_packages_are_version_keys_beside_the_stack():
    m = matrix.load()
    assert {"fla", "causal_conv1d", "mamba_ssm"} <= set(m.packages)
    assert m.version_keys == (*matrix.STACK_KEYS, *m.packages)
