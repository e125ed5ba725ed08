"""What core needs from an integration is passed in, never imported (tests/unit/test_architecture.py LAYERS): the
installed transformers' model types into `models.resolve`, fla's dispatch into `rules.Facts`."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from kernelcheck.core import matrix, models, rules
from kernelcheck.core.errors import BadInput
from kernelcheck.install import plan
from kernelcheck.integrations import fla_dispatch
from tests.environments import make_env


def test_resolve_asks_the_lookup_it_is_given_for_a_type_the_matrix_lacks() -> None:
    spec = matrix.ModelType(name="brand_new", family="unknown", module="brand_new", functions=())
    asked: list[str] = []
    got = models.resolve("brand_new", installed=lambda t: (asked.append(t), spec)[1] if t == "brand_new" else None,
                         m=matrix.load())
    assert (got.model_type, got.source, got.spec) == ("brand_new", "model_type", spec) and asked == ["brand_new"]
    with pytest.raises(BadInput, match="Unknown model 'brand_new'"):
        models.resolve("brand_new", m=matrix.load())  # the default knows the matrix only


def test_a_fla_backend_rule_is_undecided_without_the_dispatch_and_decided_with_it() -> None:
    env = make_env("9.0", triton="3.6.0", fla="0.6.0", gpu_source="none")
    base = rules.Facts(env=env, mode="train", bound=frozenset({"fla"}), model="qwen3.8-27b")
    without = {h.rule.id: h.certain for h in rules.evaluate(base, matrix.load())}
    asked = rules.Facts(env=env, mode="train", bound=frozenset({"fla"}), model="qwen3.8-27b",
                        fla_dispatch=functools.partial(fla_dispatch.backends, m=matrix.load()))
    with_it = {h.rule.id: h.certain for h in rules.evaluate(asked, matrix.load())}
    assert with_it == {"fla-640-refuses": True}
    assert without.get("fla-640-refuses") is False  # may apply: nobody asked fla's dispatch


def test_evaluate_decides_on_the_matrix_it_is_given_not_on_matrix_folder() -> None:
    env = make_env("9.0", triton="3.6.0", fla="0.6.0", gpu_source="none")
    facts = rules.Facts(env=env, mode="train", bound=frozenset({"fla"}), model="qwen3.8-27b",
                        fla_dispatch=functools.partial(fla_dispatch.backends, m=matrix.load()))
    m = matrix.load()
    assert "fla-640-refuses" in {h.rule.id for h in rules.evaluate(facts, m)}
    without = dataclasses.replace(m, breakages=tuple(b for b in m.breakages if b.id != "fla-640-refuses"))
    assert "fla-640-refuses" not in {h.rule.id for h in rules.evaluate(facts, without)}


def test_make_plan_plans_from_the_matrix_its_options_carry() -> None:
    env = make_env("9.0", triton="3.6.0", gpu_source="none")
    m = matrix.load()
    got = plan.make_plan(env, ("fla",), plan.Options(matrix=m, offline=True), {})
    assert [s.package for s in got.steps if s.import_name == "fla"]
    renamed = dataclasses.replace(m.packages["fla"], install_distribution="fla-core-renamed")
    other = dataclasses.replace(m, packages={**m.packages, "fla": renamed})
    steps = plan.make_plan(env, ("fla",), plan.Options(matrix=other, offline=True), {}).steps
    assert "fla-core-renamed" in {s.package for s in steps}


def test_the_rules_and_the_plan_load_nothing_themselves() -> None:
    """The pure decision modules read the matrix they are given: no load(), no environment, no process."""
    import ast
    from pathlib import Path

    pkg = Path(rules.__file__).resolve().parents[1]
    for rel in ("core/rules.py", "install/plan.py"):
        tree = ast.parse((pkg / rel).read_text())
        calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        assert not {c for c in calls if c.endswith(".load") or c.startswith(("subprocess.", "os.environ"))}, rel
        names = {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert "os.environ" not in names, rel
        assert "importlib.util.find_spec" not in calls, rel
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "kernelcheck.core.requirements" not in imported, rel  # installed metadata: read by the probe


def test_an_absent_condition_reads_the_probe_and_is_undecided_for_a_name_it_did_not_look_up() -> None:
    env = make_env("9.0", triton="3.6.0", gpu_source="none")
    facts = rules.Facts(env=dataclasses.replace(env, present={"tilelang": False}), mode="train", bound=frozenset())
    assert rules.holds("absent", ["tilelang"], facts) is True
    assert rules.holds("absent", ["tilelang", "never_probed"], facts) is None  # not looked up: the rule may apply
    assert rules.holds("absent", ["tilelang"], dataclasses.replace(
        facts, env=dataclasses.replace(env, present={"tilelang": True}))) is False


def test_a_requirement_unmet_condition_reads_the_probe_and_is_undecided_unprobed() -> None:
    env = make_env("9.0", triton="3.6.0", gpu_source="none", unmet=("tilelang:apache-tvm-ffi",))
    facts = rules.Facts(env=env, mode="train", bound=frozenset())
    assert rules.holds("requirement_unmet", ["tilelang:apache-tvm-ffi"], facts) is True
    met = dataclasses.replace(facts, env=dataclasses.replace(env, requirements_unmet=()))
    assert rules.holds("requirement_unmet", ["tilelang:apache-tvm-ffi"], met) is False
    unprobed = dataclasses.replace(facts, env=dataclasses.replace(env, requirements_unmet=None))
    assert rules.holds("requirement_unmet", ["tilelang:apache-tvm-ffi"], unprobed) is None  # no metadata read here


def test_matrix_load_reads_its_folder_variable_alone_and_refuses_a_folder_without_models_toml(monkeypatch,
                                                                                              tmp_path) -> None:
    from kernelcheck.core import settings

    def every_setting(*_a, **_k):
        raise AssertionError("matrix.load() parsed every setting")

    monkeypatch.setattr(settings.Settings, "from_environ", classmethod(every_setting))
    assert "qwen3_5" in matrix.load().model_types  # shipped folder, no Settings built
    monkeypatch.setenv("KERNELCHECK_MATRIX_DIR", str(tmp_path))
    with pytest.raises(BadInput) as exc:
        matrix.load()
    assert str(tmp_path) in str(exc.value)  # names the folder it refused


def test_doctors_function_statuses_read_the_matrix_they_are_given() -> None:
    """doctor/run.function_statuses decides each function's distribution from the matrix passed in (doctor loads
    it once per run): a renamed fla distribution there is the one the status names."""
    from kernelcheck.core.device import choose
    from kernelcheck.doctor.run import function_statuses
    from kernelcheck.integrations.transformers import Binding, BindingResult

    env = make_env("9.0", triton="3.6.0", fla="0.6.0", gpu_source="none")
    m = matrix.load()
    m = matrix.load()
    needs = models.needs(models.resolve("qwen3.8-27b", m=m), ("chunk_gated_delta_rule",), m=m)
    result = BindingResult("decorator", "transformers.models.qwen3_5.modeling_qwen3_5", {
        "chunk_gated_delta_rule": Binding("chunk_gated_delta_rule", "fla", "package",
                                          "fla.ops.gated_delta_rule.chunk_gated_delta_rule", "decorator")})
    got = function_statuses(needs, result, env, "train", "qwen3.8-27b", m, device=choose(env))
    assert [(f.name, f.package) for f in got] == [("chunk_gated_delta_rule", "fla-core")]
    renamed = dataclasses.replace(m.packages["fla"], install_distribution="fla-core-renamed")
    other = dataclasses.replace(m, packages={**m.packages, "fla": renamed})
    assert [f.package for f in function_statuses(needs, result, env, "train", "qwen3.8-27b", other,
                                                 device=choose(env))] == [
        "fla-core-renamed"]


def test_doctor_run_loads_no_matrix_it_is_passed_one() -> None:
    """No load() in doctor/run.py: `doctor` takes the matrix (a command's Context.matrix) as a required keyword."""
    import ast
    import inspect
    from pathlib import Path

    from kernelcheck.doctor.run import doctor

    src = (Path(rules.__file__).resolve().parents[1] / "doctor" / "run.py").read_text()
    loads = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call) and ast.unparse(n.func) == "matrix.load"]
    m = inspect.signature(doctor).parameters["m"]
    assert loads == [] and m.kind is inspect.Parameter.KEYWORD_ONLY and m.default is inspect.Parameter.empty


def test_a_matrix_reads_the_trace_signatures_of_its_own_folder(monkeypatch, tmp_path) -> None:
    """KERNELCHECK_MATRIX_DIR's copy: the matrix read from it (core/entry.py, as a Context reads it) carries that
    folder's signatures.toml, and a trace judged on it uses its thresholds; the shipped matrix keeps its own."""
    import shutil

    from kernelcheck.core import entry

    shipped = entry.matrix()
    shutil.copytree(shipped.root, tmp_path / "m")
    sig = tmp_path / "m" / "signatures.toml"
    sig.write_text(sig.read_text().replace("min_kernels = 200 ", "min_kernels = 7 ", 1))
    monkeypatch.setenv("KERNELCHECK_MATRIX_DIR", str(tmp_path / "m"))
    copy = entry.matrix()
    assert copy.root == tmp_path / "m" and copy.signatures.launch_bound.min_kernels == 7
    assert shipped.signatures.launch_bound.min_kernels == 200


def test_the_small_tables_are_read_from_the_folder_of_the_contexts_matrix(monkeypatch, tmp_path) -> None:
    """KERNELCHECK_MATRIX_DIR's copy, edited: what a command's Context loads carries that folder's small tables
    (Matrix.table), so each reader passed the matrix sees the copy's data, and the shipped matrix keeps its own."""
    import shutil

    from kernelcheck.commands.context import Context
    from kernelcheck.core import gpu
    from kernelcheck.doctor import cost
    from kernelcheck.hub import prediction
    from kernelcheck.install import target_env
    from kernelcheck.verify import layers

    shipped = Context.from_environ().matrix
    root = tmp_path / "m"
    shutil.copytree(shipped.root, root, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    edits = {"hub_offline.toml": ('repo = "kernels-community/fla"', 'repo = "kernels-community/rotary"'),
             "verified.toml": ('model_type = "qwen3_5"', 'model_type = "qwen3_next"'),
             "torch.toml": ('"2.11" = { version = "3.6.0"', '"2.11" = { version = "3.6.1"'),
             "verify.toml": ("max_parameters = 20_000_000", "max_parameters = 1_234"),
             "gpus.toml": ('"9.0",  ', '"9.0", "9.9",')}
    for name, (old, new) in edits.items():
        text = (root / name).read_text()
        assert old in text, name
        (root / name).write_text(text.replace(old, new, 1))
    monkeypatch.setenv("KERNELCHECK_MATRIX_DIR", str(root))
    copy = Context.from_environ().matrix
    assert copy.root == root and shipped.root != root
    assert prediction.confirmed_repos(m=copy) == {"kernels-community/rotary", "kernels-community/activation"}
    assert "kernels-community/fla" in prediction.confirmed_repos(m=shipped)

    def qwen_rows(m: matrix.Matrix) -> int:
        return sum(1 for r in cost.measurements(tmp_path / "none", m=m) if r["model_type"] == "qwen3_5")

    assert qwen_rows(copy) == qwen_rows(shipped) - 1
    assert (target_env.triton_pins(m=copy)["2.11"], target_env.triton_pins(m=shipped)["2.11"]) == ("3.6.1", "3.6.0")
    assert (layers.verify_data(m=copy)["tiny"]["max_parameters"],
            layers.verify_data(m=shipped)["tiny"]["max_parameters"]) == (1_234, 20_000_000)
    assert [g.capability.dotted for g in gpu.parse_arch("9.9", m=copy)] == ["9.9"]
    with pytest.raises(BadInput):
        gpu.parse_arch("9.9", m=shipped)
    # each caller gets its own copy of a table: a change to one is no other caller's
    layers.verify_data(m=copy)["tiny"]["max_parameters"] = 0
    assert layers.verify_data(m=copy)["tiny"]["max_parameters"] == 1_234
