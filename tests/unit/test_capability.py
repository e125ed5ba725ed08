"""A GPU's compute capability is a value (core/capability.py), read once where it enters (torch, nvidia-smi, --arch)
and carried: a Gpu holds a Capability, decisions compare Capabilities, text takes its spellings (sm_90) from it, and
the JSON still carries "9.0" (the vocabulary as types)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelcheck.core import environment, rules
from kernelcheck.core.capability import Capability, sm_name
from kernelcheck.core.environment import Gpu
from kernelcheck.report.sections import EnvironmentView
from tests import sources
from tests.environments import make_env

PKG = Path(__file__).resolve().parents[2] / "kernelcheck"


def test_a_gpu_built_from_a_word_holds_the_capability_and_its_json_keeps_the_word() -> None:
    gpu = Gpu("NVIDIA H200", "9.0", 1)
    assert gpu.capability == Capability(9, 0) and gpu.capability.sm == "sm_90"
    env = make_env("10.0", gpu_name="B200")
    assert env.capabilities == (Capability(10, 0),)
    assert EnvironmentView.of(env).to_json()["gpus"] == [{"name": "B200", "capability": "10.0", "index": 0}]
    with pytest.raises(ValueError):
        Gpu("x", "nine")


def test_nvidia_smi_without_a_compute_capability_counts_no_gpu_but_keeps_the_driver(monkeypatch) -> None:
    monkeypatch.setattr(environment, "_run", lambda cmd, timeout=10: "0, Tesla K80, [N/A], 470.1\n"
                                                                      "1, NVIDIA H100, 9.0, 470.1\n")
    gpus, driver = environment._nvidia_smi()
    assert [(g.index, g.capability) for g in gpus] == [(1, Capability(9, 0))] and driver == "470.1"


@pytest.mark.parametrize("key,want,caps,holds", [
    ("gpu_capability", ["9.0"], (Capability(9, 0),), True),
    ("gpu_capability", ["9.0"], (Capability(10, 0), Capability(8, 0)), False),
    ("gpu_capability_min", "9.0", (Capability(10, 0),), True),
    ("gpu_capability_min", "9.0", (Capability(8, 9),), False),
    ("gpu_capability_max", "9.0", (Capability(8, 9),), True),
    ("gpu_capability_max", "9.0", (Capability(12, 0),), False),
])
def test_a_breakage_rules_capability_condition_compares_capabilities(key, want, caps, holds) -> None:
    assert rules._holds_capability(key, want, caps) is holds


def test_a_reports_capability_word_is_shown_as_its_sm_name() -> None:
    assert [sm_name(c) for c in ("9.0", "10.3", 90, Capability(12, 0), "?", "")] == \
        ["sm_90", "sm_103", "sm_90", "sm_120", "sm_?", "sm_"]


def _dot_stripping(tree: ast.AST) -> list[str]:
    """`x.replace('.', '')`: a capability (or a version) turned into digits by hand."""
    return [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "replace" and [getattr(a, "value", None) for a in n.args] == [".", ""]]


def test_the_catalogue_finds_a_capability_turned_into_digits_by_hand() -> None:
    assert len(_dot_stripping(ast.parse("a = f'sm_{cap.replace(\".\", \"\")}'\nb = cap.replace('.', '_')\n"
                                        "c = str(g['capability']).replace('.', '')\n"))) == 2


def test_no_module_turns_a_capability_into_digits_by_hand() -> None:
    # install/target_env.py strips the dots of the CUDA and Python versions ("+cu130", "cp312"): not capabilities
    found = [f"{p.relative_to(PKG)}: {hit}" for p in sorted(PKG.rglob("*.py")) if p.name != "target_env.py"
             for hit in _dot_stripping(sources.tree(p))]
    assert found == [], "; ".join(found)
