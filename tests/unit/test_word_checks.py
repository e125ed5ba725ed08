"""Decisions read fields, not words: doctor refuses a torch that does not import on the probe's
`import_error`, not on the words of its version; the Hub decorators' switch is read with the one yes-set
(core/settings.py) unless transformers' source declares its own."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core import environment
from kernelcheck.core.environment import TorchInfo
from kernelcheck.core.errors import BrokenEnvironment
from kernelcheck.core.settings import YES
from kernelcheck.doctor import run as doctor_run
from kernelcheck.integrations import transformers_hub
from kernelcheck.report.sections import EnvironmentView
from tests.environments import make_env

PKG = Path(__file__).resolve().parents[2] / "kernelcheck"


def test_a_torch_that_does_not_import_is_probed_with_its_error_as_a_field(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "torch" else real(name, *a))
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ModuleNotFoundError
    info = environment._probe_torch()
    assert info is not None and info.import_error == "ModuleNotFoundError: import of torch halted; None in sys.modules"
    assert info.version == f"unimportable ({info.import_error})"  # the JSON's words, as before


def _env(torch: TorchInfo) -> Any:
    import dataclasses

    return dataclasses.replace(make_env(), torch=torch)


def test_doctor_refuses_on_the_import_error_field_and_the_json_does_not_print_it() -> None:
    broken = _env(TorchInfo("unimportable (SystemExit: no)", None, None, import_error="SystemExit: no"))
    with pytest.raises(BrokenEnvironment) as exc:
        doctor_run._require_torch(broken)
    # the paragraph quotes the import error field (its words: tests/integration/test_hostile_inputs.py)
    assert exc.value.exit_code == 4 and broken.torch.import_error in exc.value.message
    torch_json = EnvironmentView.of(broken).to_json()["torch"]
    assert json.dumps(torch_json) == ('{"version": "unimportable (SystemExit: no)", "cuda": null, '
                                      '"cxx11abi": null, "hip": null, "cuda_available": false}')
    doctor_run._require_torch(_env(TorchInfo("unimportable-but-a-local-build", "13.0", True)))  # words decide nothing


@pytest.mark.parametrize("value,source,enabled", [
    ("y", None, True), ("On", None, True), ("0", None, False), ("no", None, False),
    ("y", 'ENV_VARS_TRUE_VALUES = {"1", "ON", "YES", "TRUE"}\n', False),  # transformers' own set wins
    ("1", 'ENV_VARS_TRUE_VALUES = {"1", "ON", "YES", "TRUE"}\n', True),
])
def test_use_hub_kernels_reads_transformers_yes_set_or_else_the_one_in_settings(monkeypatch, value, source,
                                                                               enabled) -> None:
    monkeypatch.setenv("USE_HUB_KERNELS", value)
    assert transformers_hub._use_hub_kernels(None, source) == (value.upper(), enabled)


def test_the_yes_set_and_the_torch_import_words_have_one_home() -> None:
    yes_sets, unimportable = [], []
    for p in sorted(PKG.rglob("*.py")):
        rel = str(p.relative_to(PKG))
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Set) and {getattr(e, "value", None) for e in n.elts} >= set(YES) - {"Y"} and \
                    rel != "core/settings.py":
                yes_sets.append(f"{rel}:{n.lineno}")
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "unimportable" in n.value and \
                    rel != "core/environment.py":
                unimportable.append(f"{rel}:{n.lineno}")
    assert yes_sets == [] and unimportable == [], (yes_sets, unimportable)
