"""The library and the CLI are one house: for the same inputs, each command's library entry point and its CLI give
the same finding ids (both call commands/<command>.py `run`), and the verdict and exit code follow from the report."""

from __future__ import annotations

import functools
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import kernelcheck
from kernelcheck.cli.main import main

OFFLINE = {"HF_HUB_OFFLINE": "1"}


def cli_json(args: list[str]) -> dict[str, Any]:
    res = CliRunner().invoke(main, [*args, "--json"], env=OFFLINE, catch_exceptions=False)
    out: dict[str, Any] = json.loads(res.stdout)
    assert out["exit_code"] == res.exit_code
    return out


def ids(findings: list[Any]) -> list[str]:
    return [f["id"] if isinstance(f, dict) else f.id for f in findings]


@pytest.fixture(autouse=True)
def _same_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both paths see the same machine: the H200 image with this box's transformers, probed without a process."""
    from importlib.metadata import version

    from kernelcheck.core import environment
    from tests.environments import make_env

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # The same job on every transformers: no Hub kernels (5.25 loads them by default; 5.24 never does unless asked).
    monkeypatch.setenv("USE_HUB_KERNELS", "0")
    monkeypatch.setattr(environment, "probe", lambda **_: make_env(transformers=version("transformers")))


DOCTOR = ["doctor", "--model", "qwen3.8-27b", "--mode", "train", "--arch", "9.0"]


@functools.cache
def cli_doctor() -> str:
    """`kernelcheck doctor` for the H200 image, as the CLI prints it (run once: the fleet case reuses it)."""
    return json.dumps(cli_json(DOCTOR))


def test_doctor_the_library_gets_the_cli_findings_cost_and_packing_included() -> None:
    lib = kernelcheck.check("qwen3.8-27b", "train", arch="9.0")
    cli = json.loads(cli_doctor())
    assert ids(lib.findings) == ids(cli["findings"])
    assert {"gpu-target", "packing", "fallback-cost"} <= set(ids(lib.findings))
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"])


@functools.cache
def _static_json(model: str) -> str:
    from kernelcheck.core import matrix
    from kernelcheck.doctor import run
    from kernelcheck.report.model import render_json

    return render_json(run.doctor(model, "train", m=matrix.load()))


def _static(model: str = "qwen3.8-27b", command: str = "verify") -> Any:
    """doctor/run.py's report alone (nothing a command adds), standing in for a run of the real layers: a fresh
    Report each time, read back from one run."""
    from kernelcheck.report.model import Report

    report = Report.from_json(json.loads(_static_json(model)))
    report.command = command
    return report


def test_verify_the_library_gets_the_cli_findings_cost_included(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.verify import run

    monkeypatch.setattr(run, "verify", lambda model, **_: _static(model))
    lib = kernelcheck.verify_model("qwen3.8-27b")
    cli = cli_json(["verify", "--model", "qwen3.8-27b"])
    assert ids(lib.findings) == ids(cli["findings"])
    assert "fallback-cost" in ids(lib.findings)
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"])


def test_hub_the_library_gets_the_cli_findings() -> None:
    from kernelcheck.commands import hub
    from kernelcheck.commands.context import Context

    lib = hub.run(hub.Request(model="qwen3.8-27b", mode="train"), Context.from_environ()).report
    cli = cli_json(["hub", "--model", "qwen3.8-27b", "--mode", "train"])
    assert ids(lib.findings) == ids(cli["findings"])
    assert "hub-decides-nothing" in ids(lib.findings)
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"])


def test_hub_and_install_share_one_copy_of_the_prefetch_findings() -> None:
    from kernelcheck.core.plan_step import Step, StepKind
    from kernelcheck.hub import prefetch

    steps = [Step("fla", action, "hub", f"kernels-community/fla@v2 ({action})", "why", command="cmd" * (i == 0),
                  kind=StepKind.HUB) for i, action in enumerate(["failed", "skipped", "missing", "cached", "planned"])]
    got = prefetch.findings(steps)
    assert [(f.id, f.severity, f.fix) for f in got] == [("hub-prefetch-failed", "fallback", "cmd"),
                                                        ("hub-prefetch-skipped", "fallback", None),
                                                        ("hub-prefetch-missing", "fallback", None)]
    import inspect

    from kernelcheck.commands import hub
    from kernelcheck.install import command

    assert "prefetch.findings(" in inspect.getsource(command) and "prefetch.findings(" in inspect.getsource(hub)


def test_install_dry_run_the_library_gets_the_cli_findings_and_verdict(tmp_path: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.install import sources

    monkeypatch.setattr(sources, "gather", lambda *_, **__: {})  # no candidates: pip is not asked
    options = {"source": "wheelhouse", "wheelhouse": str(tmp_path), "offline": True, "arch": "9.0"}
    lib = kernelcheck.plan_install("qwen3.8-27b", "train", **options)
    cli = cli_json(["install", "--model", "qwen3.8-27b", "--mode", "train", "--dry-run", "--source", "wheelhouse",
                    "--wheelhouse", str(tmp_path), "--offline", "--arch", "9.0"])
    assert ids(lib.findings) == ids(cli["findings"]) and lib.findings
    assert [s.to_json() for s in lib.plan or []] == cli["plan"]
    assert lib.prediction is not None and lib.prediction.predicted == cli["verdict"]


DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("trace", ["step/cpu_tiny_step.json.gz", "gpu/gdn_fallback.json.gz"])
def test_trace_the_library_gets_the_cli_findings(trace: str) -> None:
    lib = kernelcheck.trace_report(DATA / trace)
    cli = cli_json(["trace", str(DATA / trace)])
    assert ids(lib.findings) == ids(cli["findings"]) and lib.findings
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"])
    analysed = kernelcheck.analyze_trace(DATA / trace)  # the analysis' own verdict is the report's, one enum
    assert analysed.verdict is lib.verdict and analysed.diagnosis == cli["trace"]["diagnosis"]


def test_padding_the_library_gets_the_cli_measurement(tmp_path: Path) -> None:
    from kernelcheck.commands import padding
    from kernelcheck.commands.context import Context

    data = tmp_path / "lengths.txt"
    data.write_text("\n".join(str(n) for n in [5, 300, 17, 4096, 120, 64, 9000, 33]) + "\n")
    lib = padding.run(padding.Request(str(data), "batch:4"), Context.from_environ())
    cli = cli_json(["padding", str(data), "--batching", "batch:4"])
    assert lib.report.to_json() == cli and cli["padding"]["pad_tokens"] > 0
    assert lib.exit_code == cli["exit_code"] == 0


def test_compare_the_library_gets_the_cli_fleet() -> None:
    from kernelcheck.commands import compare
    from kernelcheck.commands.context import Context

    files = [str(DATA / "reports" / "doctor_train.json"), str(DATA / "reports" / "doctor_infer.json")]
    lib = compare.run(compare.Request(tuple(files), expect=3), Context.from_environ())
    cli = cli_json(["compare", *files, "--expect", "3"])
    assert lib.report.to_json() == cli and cli["missing"]
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"]) == ("broken", 4)


def test_fleet_the_gate_the_cli_runs_is_the_library_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """`doctor --all-ranks` on rank 0 of 2 whose other rank sends a record it cannot read, on a store in memory: the
    CLI's fleet is commands/fleet.py's for the same record."""
    from kernelcheck.commands import fleet
    from kernelcheck.commands.context import Context
    from kernelcheck.fleet import gather, ranks
    from tests.unit.test_fleet_record import _Store

    monkeypatch.setattr(gather, "open_store", lambda info, timeout: _Store(others=1))
    monkeypatch.setattr(gather, "_gather_records", lambda s, info, blob, timeout: [blob, b"from another version"])
    monkeypatch.setattr(gather, "_destroy", lambda: None)
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    args = [*DOCTOR, "--all-ranks", "--timeout", "1"]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        cli = cli_json(args)  # a rank that knows the fleet's verdict ignores SIGTERM from then on (cli/fleet.py)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    own = json.loads(cli_doctor())
    lib = fleet.run(fleet.Request("doctor", own, ranks.discover(env), 1.0), Context.from_environ())
    got = lib.report.table.to_json()
    assert [(m["rank"], m["kind"]) for m in got["missing"]] == [(m["rank"], m["kind"]) for m in cli["missing"]]
    assert [r["findings"] for r in got["ranks"]] == [r["findings"] for r in cli["ranks"]] and cli["ranks"]
    assert (lib.verdict, lib.exit_code) == (cli["verdict"], cli["exit_code"]) == ("broken", 4)


def test_forecast_the_library_and_the_cli_forecast_the_same_upgrade(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor --upgrade runs doctor in fresh processes (forecast/command.py, integration lane); here it is given the
    two real reports, and both paths must ask it the same question and print the same diff."""
    from kernelcheck.commands import forecast
    from kernelcheck.commands.context import Context
    from kernelcheck.core.status import Finding, Severity
    from kernelcheck.forecast import command
    from kernelcheck.forecast.diff import diff
    from kernelcheck.report.model import Report

    before, after = (Report.from_json(json.loads((DATA / "reports" / "doctor_train.json").read_text()))
                     for _ in range(2))
    after.findings.append(Finding("hub-offline-uncached", Severity.BROKEN, "not in the cache"))
    asked: list[tuple[list[str], list[str]]] = []

    def forecast_of(specs: list[str], args: list[str], index: Any, if_worse: bool = False,
                    *, m: Any) -> command.Forecast:
        asked.append((specs, args))
        return command.Forecast(specs, [], before, after, diff(before, after), [], if_worse)

    monkeypatch.setattr(command, "run", forecast_of)
    cli = cli_json(["doctor", "--model", "qwen3.8-27b", "--upgrade", "transformers==5.25.0"])
    lib = forecast.run(forecast.Request(("transformers==5.25.0",), tuple(asked[0][1])), Context.from_environ())
    assert asked[0] == asked[1] and "--model" in asked[0][1]
    assert lib.report.to_json() == cli and cli["diff"]["findings_added"] == ["hub-offline-uncached"]
    assert lib.exit_code == cli["exit_code"] == 4


def test_no_cache_is_passed_down_not_left_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from kernelcheck.commands import doctor
    from kernelcheck.commands.context import Context
    from kernelcheck.doctor import run

    seen: list[dict[str, Any]] = []
    monkeypatch.delenv("KERNELCHECK_IMPORT_CACHE", raising=False)
    static = _static(command="doctor")
    monkeypatch.setattr(run, "doctor", lambda *a, **k: seen.append(k) or static)
    doctor.run(doctor.Request(model="qwen3.8-27b", no_cache=True), Context.from_environ())
    assert seen[0]["import_cache"] is False and "KERNELCHECK_IMPORT_CACHE" not in os.environ


def test_verbose_reaches_the_live_run_as_an_argument_not_through_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from kernelcheck.verify import run

    seen: list[dict[str, Any]] = []
    static = _static()
    monkeypatch.delenv("KERNELCHECK_VERBOSE", raising=False)
    monkeypatch.setattr(run, "verify", lambda model, **k: seen.append(k) or static)
    res = CliRunner().invoke(main, ["verify", "--model", "qwen3.8-27b", "--verbose", "--json"], env=OFFLINE,
                             catch_exceptions=False)
    assert json.loads(res.stdout)["command"] == "verify"
    assert seen[0]["verbose"] is True and "KERNELCHECK_VERBOSE" not in os.environ


def test_the_context_reads_once_and_probes_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.commands import hub
    from kernelcheck.commands.context import Context
    from kernelcheck.core import environment, matrix
    from kernelcheck.core.errors import BadInput

    loads: list[int] = []
    real = matrix.load
    monkeypatch.setattr(matrix, "load", lambda: loads.append(1) or real())
    ctx = Context.from_environ({"KERNELCHECK_VERBOSE": "1"})
    assert ctx.matrix is ctx.matrix and loads == [1] and ctx.verbose
    monkeypatch.setattr(environment, "probe", lambda **_: pytest.fail("a usage error probed the machine"))
    with pytest.raises(BadInput, match="--prefetch"):
        hub.run(hub.Request(model="qwen3.8-27b", lock="kernels.lock"), ctx)


# Usage: each command's library entry point refuses what its CLI refuses, with the same message (commands/<command>.py
# `check`, which `run` calls before anything is probed), and the CLI exits 2 with it.
def _lib(command: str, **fields: Any) -> Any:
    import importlib

    from kernelcheck.commands.context import Context

    module = importlib.import_module(f"kernelcheck.commands.{command}")
    return lambda: module.run(module.Request(**fields), Context.from_environ())


USAGE = {
    "doctor --arch with --live": (["doctor", "--model", "qwen3.8-27b", "--arch", "9.0", "--live"],
                                  lambda: kernelcheck.check("qwen3.8-27b", arch="9.0", live=True)),
    "doctor unknown model": (["doctor", "--model", "qwen3.8-72b"], lambda: kernelcheck.check("qwen3.8-72b")),
    "doctor unknown packing mode": (["doctor", "--model", "qwen3.8-27b", "--packing", "bogus"],
                                    lambda: kernelcheck.check("qwen3.8-27b", packing="bogus")),
    "verify --layers without --step": (["verify", "--model", "qwen3.8-27b", "--layers", "2"],
                                       lambda: kernelcheck.verify_model("qwen3.8-27b", layers=2)),
    "verify --step in infer mode": (["verify", "--model", "qwen3.8-27b", "--step", "--mode", "infer"],
                                    lambda: kernelcheck.verify_model("qwen3.8-27b", mode="infer", step=True)),
    "verify --layers 0": (["verify", "--model", "qwen3.8-27b", "--step", "--layers", "0"],
                          lambda: kernelcheck.verify_model("qwen3.8-27b", step=True, layers=0)),
    "verify --batch without --packing": (["verify", "--model", "qwen3.8-27b", "--batch", "b.pt"],
                                         lambda: kernelcheck.verify_model("qwen3.8-27b", batch="b.pt")),
    "install unknown package": (["install", "--model", "qwen3.8-27b", "--dry-run", "--package", "nosuch"],
                                lambda: kernelcheck.plan_install("qwen3.8-27b", packages=("nosuch",))),
    "hub --lock without --prefetch": (["hub", "--model", "qwen3.8-27b", "--lock", "kernels.lock"],
                                      _lib("hub", model="qwen3.8-27b", lock="kernels.lock")),
    "trace --model without --budget": (["trace", str(DATA / "step" / "cpu_tiny_step.json.gz"), "--model", "m"],
                                       _lib("trace", file=str(DATA / "step" / "cpu_tiny_step.json.gz"), model="m")),
    "padding unknown batching rule": (["padding", "lengths.txt", "--batching", "bogus:1"],
                                      _lib("padding", data="lengths.txt", batching="bogus:1")),
    "warm without --model": (["warm", "--cache-dir", "jit"], _lib("warm", model=None, cache_dir="jit")),
    "doctor --upgrade single equals": (["doctor", "--model", "qwen3.8-27b", "--upgrade", "transformers=5.24.0"],
                                       _lib("forecast", specs=("transformers=5.24.0",))),
}


@pytest.mark.parametrize("case", list(USAGE))
def test_the_library_refuses_what_the_cli_refuses_with_the_same_message(case: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.core import environment
    from kernelcheck.core.errors import BadInput

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(environment, "probe", lambda **_: pytest.fail("a usage error probed the machine"))
    args, library = USAGE[case]
    with pytest.raises(BadInput) as refused:
        library()
    res = CliRunner().invoke(main, args, env=OFFLINE)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"kernelcheck {args[0]}: {refused.value.message}" in res.stderr  # the one paragraph, word for word


_REPORT = str(DATA / "reports" / "doctor_train.json")
CLICK = {  # what click's types refuse on the command line, the command's `check` refuses in the library
    "--mode": (["doctor", "--mode", "serve"], lambda: kernelcheck.check(None, mode="serve")),
    "--packing": (["verify", "--model", "qwen3.8-27b", "--packing", "bogus"],
                  lambda: kernelcheck.verify_model("qwen3.8-27b", packing="bogus")),
    "--shape": (["verify", "--model", "qwen3.8-27b", "--shape", "huge"],
                lambda: kernelcheck.verify_model("qwen3.8-27b", shape="huge")),
    "--source": (["hub", "--model", "qwen3.8-27b", "--source", "web"], _lib("hub", model="qwen3.8-27b", source="web")),
    "--expect": (["compare", _REPORT, "--expect", "0"], _lib("compare", reports=(_REPORT,), expect=0)),
    "REPORT": (["compare"], _lib("compare", reports=())),
}


@pytest.mark.parametrize("flag", list(CLICK))
def test_the_library_refuses_the_values_the_cli_types_refuse(flag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcheck.core import environment
    from kernelcheck.core.errors import BadInput

    monkeypatch.setattr(environment, "probe", lambda **_: pytest.fail("a usage error probed the machine"))
    args, library = CLICK[flag]
    with pytest.raises(BadInput, match=flag):
        library()
    res = CliRunner().invoke(main, args, env=OFFLINE)
    assert res.exit_code == 2 and flag in res.output


def test_models_the_library_gets_the_cli_listing_and_it_fits_its_schema() -> None:
    import jsonschema

    from kernelcheck import schemas

    res = CliRunner().invoke(main, ["models", "--json"], catch_exceptions=False)
    assert res.exit_code == 0
    cli = json.loads(res.stdout)
    jsonschema.Draft202012Validator(schemas.load("models")).validate(cli)
    lib = kernelcheck.models()
    assert [a.alias for a in lib.aliases] == [a["alias"] for a in cli["aliases"]] and lib.aliases
    assert [(t.model_type, t.family) for t in lib.model_types] == [(t["model_type"], t["family"])
                                                                  for t in cli["model_types"]]
    qwen = next(t for t in lib.model_types if t.model_type == "qwen3_5")
    assert qwen.family == "gated_deltanet" and "chunk_gated_delta_rule" in qwen.functions
    assert json.loads(json.dumps(lib.to_json())) == cli


def test_every_command_with_options_checks_them_first_in_its_run() -> None:
    """Usage rules live beside each command (commands/<command>.py `check`) and its `run` calls `check` before it does
    anything else, so no entry point, the CLI's or the library's, can get past them. fleet's request is the CLI's
    own plumbing (--all-ranks) and models has no options."""
    import ast

    commands = Path(kernelcheck.__file__).parent / "commands"
    unchecked, checked = [], []
    for path in sorted(commands.glob("*.py")):
        tree = ast.parse(path.read_text())
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        if "run" not in funcs or path.stem in ("fleet", "models"):
            continue
        first = next((s for s in funcs["run"].body if not (isinstance(s, ast.Expr)
                                                           and isinstance(s.value, ast.Constant))), None)
        calls = [n.func.id for n in ast.walk(first) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)] \
            if first is not None else []
        if "check" not in funcs or "check" not in calls:
            unchecked.append(path.stem)
        checked.append(path.stem)
    assert unchecked == [] and len(checked) == 9
