"""One home per concept. Each concept that had copies (offline, exit codes and their rank, errors)
is defined once; the decisions that used the copies now read the one home, with explicit inputs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelcheck.core import errors, status
from kernelcheck.core.environment import torch_minor
from kernelcheck.core.gpu import default_device
from kernelcheck.fleet import table
from kernelcheck.fleet.record import RankRecord
from kernelcheck.install import plan_types
from kernelcheck.install.plan import Options
from kernelcheck.integrations.kernels_hub import HubSystem
from tests import sources
from tests.environments import make_env

PACKAGE = Path(__file__).resolve().parents[2] / "kernelcheck"


def _defined(name: str) -> list[str]:
    """Modules of the package that define `name` (a function, a class, or a module-level assignment)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = sources.tree(path)
        for node in tree.body:
            names = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [
                t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
                names = [e.id for e in node.targets[0].elts if isinstance(e, ast.Name)]
            if name in names:
                out.append(str(path.relative_to(PACKAGE)))
    return out


@pytest.mark.parametrize("name,home", [
    ("hub_offline", "core/settings.py"), ("offline", "core/settings.py"),
    ("network_timeout", "core/settings.py"), ("torch_minor", "core/environment.py"),
    ("default_device", "core/gpu.py"),
    ("EXIT_BROKEN", "core/status.py"), ("EXIT_CODE", "core/status.py"),
    ("InstallFailed", "core/errors.py"), ("BuildFailed", "core/errors.py"),
    ("FleetError", "core/errors.py"), ("FleetFailure", "core/errors.py"),
])
def test_each_concept_is_defined_in_its_one_home(name: str, home: str) -> None:
    assert _defined(name) == [home]


@pytest.mark.parametrize("codes,worst", [
    ([0, 3], 3), ([0, 3, 2], 2), ([3, 2, 1], 1), ([1, 4, 0], 4), ([0, 3, 7], 7), ([], 4), ([0], 0)])
def test_one_rank_of_exit_codes_broken_internal_usage_fallback_ready(codes: list[int], worst: int) -> None:
    assert status.worst_exit(codes) == worst
    records = [RankRecord(exit_code=c) for c in codes]
    assert table.fleet_code(records, {}) == worst


@pytest.mark.parametrize("code,verdict", [(0, "ready"), (3, "fallback"), (4, "broken"), (1, None), (2, None)])
def test_the_fleet_verdict_is_the_one_exit_table_read_back(code: int, verdict: str | None) -> None:
    assert table.to_json("doctor", [], {}, code)["verdict"] == verdict


def test_install_errors_end_broken_and_build_failures_are_install_failures() -> None:
    for cls in (errors.InstallFailed, errors.BuildFailed, errors.FleetError, errors.FleetFailure):
        assert issubclass(cls, errors.KernelcheckError) and cls("x").exit_code == status.EXIT_BROKEN
    assert issubclass(errors.BuildFailed, errors.InstallFailed)
    assert issubclass(errors.FleetFailure, errors.FleetError)


@pytest.mark.parametrize("version,mm", [("2.11.0+cu130", "2.11"), ("2.13.0+cpu", "2.13"), ("2.12", "2.12"),
                                        ("2.10.0a0+git1234", "2.10"), ("", None), (None, None), ("torch", None)])
def test_torch_major_minor_has_one_spelling(version: str | None, mm: str | None) -> None:
    assert torch_minor(version) == mm


def test_the_install_target_and_the_manifest_read_torch_minor_from_the_one_helper() -> None:
    target = plan_types.wheel_fit(make_env(torch="2.11.0+cu130"), Options())
    assert target.torch_mm == "2.11"
    assert plan_types.wheel_fit(make_env(torch="2.13.0+cpu", cuda=None), Options()).torch_mm == "2.13"


@pytest.mark.parametrize("torch,cuda,device,target,want", [
    ("2.11.0+cu130", "13.0", None, None, "cuda"),
    ("2.13.0+cpu", None, None, None, "cpu"),
    ("2.13.0+cpu", None, None, HubSystem(torch="2.11", cuda="13.0"), "cuda"),  # planning a GPU image on a CPU box
    ("2.13.0+cpu", None, None, HubSystem(torch="2.11", cuda=""), "cpu"),       # a CPU target build
    ("2.11.0+cu130", "13.0", "xpu", HubSystem(cuda="13.0"), "xpu"),             # the user's --device wins
])
def test_the_job_device_default_is_decided_once(torch: str, cuda: str | None, device: str | None,
                                                 target: HubSystem | None, want: str) -> None:
    assert default_device(make_env(None, torch=torch, cuda=cuda), device, target) == want
