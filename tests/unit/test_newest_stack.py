"""The regressions the newest releases (transformers 5.25 + kernels 0.19.1, what the README's set-up resolves to)
brought in, each pinned by a test that runs on both the pinned stack and the newest one (the "today" lane of
.ci/run runs the fast lane there): a `kernelcheck hub` that checked nothing is never READY."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core.status import Verdict
from kernelcheck.hub import check as hub_check
from kernelcheck.integrations.transformers_hub import HubRepo, MappingEntry, TransformersHub
from kernelcheck.report.hub import HubMapEntry, HubRow, HubTransformers
from kernelcheck.report.model import HubSection, Report
from tests.environments import make_env

FLA = MappingEntry("chunk_gated_delta_rule", "cuda", ("TRAINING",), HubRepo("kernels-community/fla",
                   "chunk_gated_delta_rule", version=2))
TH = TransformersHub("5.25.0", "0.19.1", ("0.19.1", "0.20.0"), "import_utils", True, "YES", False, True, True,
                     "modeling_utils.py line 4224", True, (FLA,), "hub_kernels.py", None, ())


def _section(used: bool, rows: list[HubRow], device: str = "cpu") -> HubSection:
    return HubSection([], used, None if used else "use_kernels is off", device, "train", True,
                      HubTransformers.of(TH), [HubMapEntry.of(FLA)], rows, [])


def test_hub_used_but_mapping_nothing_for_the_device_decides_nothing() -> None:
    """5.25 defaults use_kernels to True, and on a CPU it maps no Hub kernel: nothing was checked, so not READY."""
    cpu = [HubRow("chunk_gated_delta_rule", "function", True, note="no Hub kernel for cpu")]
    f = hub_check.decides_nothing(_section(True, cpu), "qwen3.8-27b", "train")
    assert f is not None and f.id == "hub-decides-nothing" and f.severity == "fallback"
    rep = Report("hub", None, None, "train")
    rep.findings.append(f)
    assert rep.verdict == Verdict.FALLBACK
    assert hub_check.decides_nothing(_section(False, cpu), "qwen3.8-27b", "train") is not None  # not used: as before
    judged = [HubRow("chunk_gated_delta_rule", "function", True, repo="kernels-community/fla@v2",
                     variant="torch-universal")]
    assert hub_check.decides_nothing(_section(True, judged, "cuda"), "qwen3.8-27b", "train") is None


def test_hub_for_a_model_on_a_cpu_machine_is_never_ready(monkeypatch) -> None:
    """The installed transformers and kernels, whichever they are (5.24: Hub kernels off by default; 5.25: on by
    default, but none mapped for cpu), on a CPU machine (the probe's answer given, not run)."""
    from kernelcheck.core import environment
    from kernelcheck.integrations import transformers_models

    cpu = make_env(None, torch="2.13.0+cpu", cuda=None, triton=None, nvcc=None,
                           transformers=transformers_models.installed_version() or "5.24.0")
    monkeypatch.setattr(environment, "probe", lambda **_: cpu)
    res = CliRunner().invoke(main, ["hub", "--model", "qwen3.8-27b", "--device", "cpu", "--json"],
                             env={"HF_HUB_OFFLINE": "1"})
    assert res.exit_code == 3, res.output
    data = json.loads(res.stdout)
    assert "hub-decides-nothing" in [f["id"] for f in data["findings"]]
    assert data["device"] == {"type": "cpu", "origin": "flag", "visible": True}


def test_the_ground_truth_harness_imports_no_test_runner_at_module_level() -> None:
    """`python -m tests.groundtruth` runs in a user's venv (a CUDA torch build without pytest): the harness and the
    test modules it imports (tests/envs.py builds its sites) import pytest only where pytest runs them."""
    import ast
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    todo, seen = ["groundtruth"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((tests / f"{name}.py").read_text())
        nested = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in nested or not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(m.split(".")[0] in ("pytest", "hypothesis", "_pytest") for m in mods), (name, mods)
            todo += [m.split(".", 1)[1] for m in mods if m.startswith("tests.") and (tests / f"{m[6:]}.py").exists()]
        if name == "groundtruth":  # and what main() imports when it builds a site
            todo.append("envs")
    assert {"groundtruth", "groundtruth_compare", "envs"} <= seen


def test_the_today_lane_runs_the_readmes_own_set_up_commands() -> None:
    """.ci/run's "today" lane installs what scripts/readme_setup.py reads from the README: torch first, then
    kernelcheck with its test extra, unpinned otherwise (what a newcomer gets that day)."""
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo / "scripts"))
    try:
        import readme_setup
    finally:
        sys.path.pop(0)
    commands = readme_setup.setup_commands((repo / "README.md").read_text())
    assert commands[0].startswith("pip install torch") and commands[-1] == "pip install -e '.[test]'"
    assert "scripts/readme_setup.py" in (repo / ".ci" / "run").read_text()
    assert readme_setup.setup_commands("```bash\npip install x\n```\n") == []  # not the fast lane's block
