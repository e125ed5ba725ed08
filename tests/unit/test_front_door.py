"""The library's front door (kernelcheck/__init__.py): a small `__all__` of thin wrappers over the functions the
commands call, each importing its command only when called, and a py.typed marker so type checkers read them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernelcheck

PKG = Path(kernelcheck.__file__).resolve().parent


def test_the_front_door_imports_nothing_until_called_but_the_package_metadata() -> None:
    tree = ast.parse((PKG / "__init__.py").read_text())
    eager = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and "kernelcheck" in ast.unparse(n)]
    # `if TYPE_CHECKING:` imports are not statements of the module body
    assert {getattr(n, "module", None) for n in eager} == {"kernelcheck.core.version"}
    assert {a.name for n in eager for a in n.names} == {"__version__", "SCHEMA"}
    version = ast.parse((PKG / "core" / "version.py").read_text())  # which itself imports nothing of the package
    assert [ast.unparse(n) for n in version.body if isinstance(n, (ast.Import, ast.ImportFrom))
            and "kernelcheck" in ast.unparse(n)] == []
    assert kernelcheck.__version__ == kernelcheck.core.version.__version__


def test_all_names_the_api_and_none_of_them_is_a_subpackage() -> None:
    subpackages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert kernelcheck.__all__ == ["__version__", "analyze_trace", "applied_kernels", "applied_lines", "check",
                                   "models", "plan_install", "prefetch_hub_kernels", "resolve_model", "trace_report",
                                   "verify_model"]
    assert set(kernelcheck.__all__) & subpackages == set()  # `import kernelcheck.doctor` would rebind the name
    assert all(hasattr(kernelcheck, name) for name in kernelcheck.__all__)


def test_check_is_the_doctor_command_with_the_same_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.commands import doctor
    from kernelcheck.core.outcome import Outcome
    from kernelcheck.core.status import Verdict

    calls: list[doctor.Request] = []
    monkeypatch.setattr(doctor, "run", lambda req, ctx: calls.append(req) or Outcome("report", Verdict.READY))
    assert kernelcheck.check("qwen3.8-27b", "infer", hub=False) == "report"
    assert calls == [doctor.Request(model="qwen3.8-27b", mode="infer", hub=False, isolate=False)]


def test_plan_install_is_a_dry_run_of_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kernelcheck.core.outcome import Outcome
    from kernelcheck.core.status import Verdict
    from kernelcheck.install import command

    seen: list[command.Request] = []
    monkeypatch.setattr(command, "run",
                        lambda req, echo, as_json, m: seen.append(req) or Outcome("report", Verdict.READY))
    assert kernelcheck.plan_install("qwen3.8-27b", source="wheelhouse", wheelhouse=str(tmp_path)) == "report"
    assert [(r.model, r.mode, r.dry_run, r.source, r.wheelhouse) for r in seen] == [
        ("qwen3.8-27b", "train", True, "wheelhouse", str(tmp_path))]


def test_resolve_model_knows_what_the_installed_transformers_registers() -> None:
    got = kernelcheck.resolve_model("qwen3.8-27b")
    assert (got.model_type, got.source, got.alias) == ("qwen3_5", "shipped-config", "qwen3.8-27b")


def test_a_bad_model_is_bad_input_through_the_front_door_too() -> None:
    from kernelcheck.core.errors import BadInput

    with pytest.raises(BadInput, match="Unknown model 'no-such-model'"):
        kernelcheck.resolve_model("no-such-model")


def test_the_package_says_it_is_typed_and_the_wheel_ships_the_marker() -> None:
    import tomllib

    assert (PKG / "py.typed").is_file()
    data = tomllib.loads((PKG.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data["kernelcheck"]
