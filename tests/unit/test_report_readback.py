"""A report's JSON reads back typed (Report.from_json): to_json(from_json(x)) == x for real reports, and the text
renderers (report/text.py; trace/render.py for trace) give from those values what the command printed. The samples
in tests/data/reports/ are real `--json` and text outputs of doctor, hub, install --dry-run, verify, verify --step
and trace (`-o FILE.json`: the JSON and the text of one run; trace_fallback: `kernelcheck trace
tests/data/gpu/gdn_fallback.json.gz`) on a CPU machine (HF_HUB_OFFLINE=1, NO_COLOR=1, KERNELCHECK_IMPORT_CACHE=0,
piped: 100 columns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core.outcome import Outcome
from kernelcheck.core.status import verdict_of_exit
from kernelcheck.install import command as install_cmd
from kernelcheck.report.model import ErrorReport, Installed, Report, read_report, render_json
from kernelcheck.report.terminal import PIPED_WIDTH, Terminal, present
from kernelcheck.report.text import render_doctor_after, render_install, render_install_plan, render_text
from kernelcheck.trace import render as trace_render

DATA = Path(__file__).resolve().parents[1] / "data" / "reports"
REPO_DOCS = Path(__file__).resolve().parents[2] / "docs"
TYPED_LIVE = "2026-12-05-h100-typed-live-5297a57"  # docs/measurements/: verify --benchmark and --step on an H100


def sample(name: str) -> tuple[str, str]:
    return (DATA / f"{name}.json").read_text(), (DATA / f"{name}.txt").read_text()


def shown(text: str) -> str:
    return present(text, Terminal(width=PIPED_WIDTH)) + "\n"


def rendered(data: dict[str, Any]) -> str:
    """What a command prints, piped, for the report whose JSON is `data`: the renderers' text from its values
    (their words are pinned by the samples below), for tests that check a real run's text through its values."""
    rep = Report.from_json(data)
    return shown(trace_render.render_text(rep) if rep.command == "trace" else render_text(rep, verbose=False))


@pytest.mark.parametrize("name", ["doctor_train", "doctor_infer", "hub", "verify", "verify_step", "trace_fallback"])
def test_a_report_reads_back_byte_for_byte_and_renders_as_printed(name: str) -> None:
    raw, text = sample(name)
    rep = Report.from_json(json.loads(raw))
    assert render_json(rep) + "\n" == raw
    printed = trace_render.render_text(rep) if rep.command == "trace" else render_text(rep, verbose=False)
    assert shown(printed) == text


def test_the_install_dry_run_reads_back_and_its_verdict_line_comes_from_the_values() -> None:
    raw, text = sample("install_dry_run")
    data = json.loads(raw)
    rep = Report.from_json(data)
    outcome = Outcome(rep, verdict_of_exit(data["exit_code"]))
    assert install_cmd.to_json(outcome) + "\n" == raw
    out = render_install(rep, data["exit_code"], dry_run=True, verbose=False)
    assert shown(out) == text
    assert out.splitlines()[-1] == ("verdict (predicted after this plan): FALLBACK (exit 3)  "
                                    "[dry run: nothing was changed]")
    # a real install printed its plan before it ran: the report's text leaves it out, the plan text is the head
    assert "plan" not in render_install(rep, 0, dry_run=False).splitlines()
    assert render_install(rep, 0, dry_run=False).splitlines()[-1] == "verdict (after install): READY (exit 0)"
    plan = render_install_plan(rep).splitlines()
    assert plan[0] == text.splitlines()[0] and plan[1] == "plan" and plan[2].startswith("  1. refuse   fla-core")


def test_install_holds_the_doctor_after_it_typed_and_prints_its_json_unchanged() -> None:
    raw, _ = sample("doctor_train")
    after = read_report(json.loads(raw))
    assert isinstance(after, Report)
    inst = Report("install", after.environment, after.model, "train")
    inst.installed = Installed([], None, 1.0, after, has_doctor_after=True)
    data = json.loads(render_json(inst))
    assert data["doctor_after"] == json.loads(raw)
    back = Report.from_json(data)
    assert back.installed is not None and isinstance(back.installed.doctor_after, Report)
    assert render_json(back) == render_json(inst)


def test_an_error_report_reads_back_and_the_doctor_after_renders_each_outcome() -> None:
    err = {"schema": "kernelcheck.error/1", "command": "doctor", "verdict": None, "exit_code": 2, "error": "bad"}
    typed = read_report(err)
    assert typed == ErrorReport("doctor", None, 2, "bad") and typed.to_json() == err
    assert render_doctor_after(typed, 2, "") == "doctor: bad"
    assert render_doctor_after(None, 1, "Traceback\n  boom\n") == "doctor did not run (exit 1): Traceback\n  boom"
    raw, _ = sample("doctor_train")
    rep = Report.from_json(json.loads(raw))
    assert render_doctor_after(rep, 3, "") == render_text(rep)


def test_the_step_section_reads_back_typed_and_its_lines_come_from_its_values() -> None:
    from kernelcheck.report import live_text
    from kernelcheck.report.step import StepSection
    from kernelcheck.verify.step import live_items

    data = json.loads(sample("verify_step")[0])
    rep = Report.from_json(data)
    assert isinstance(rep.step, StepSection) and rep.step.tokens == 32
    assert live_text.lines(live_items(rep.step, verbose=False)) == data["live"]["lines"]


def test_an_install_plan_with_rejected_candidates_and_a_hub_plan_read_back_typed() -> None:
    """Every step kind and rejection kind reads back as the value it was (Step.from_json), and the JSON is the same;
    a Hub pre-fetch step (no `kind` in its JSON) reads back as kind hub and prints only its own keys."""
    from kernelcheck.core.plan_step import Rejected, RejectKind, Step, StepKind
    from tests.environments import model_ref

    inst = Report("install", None, model_ref("m"), "train")
    inst.plan = [Step("causal-conv1d", "build", "build", "causal_conv1d-1.7.0", "no matching wheel", "pip wheel ...",
                      (Rejected("x.whl (wheelhouse)", "built for torch 2.13", kind=RejectKind.TORCH_MINOR),
                       Rejected("release x.whl", "HTTP 404", kind=RejectKind.RELEASE_MISSING)),
                      "/w/causal_conv1d-1.7.0.tar.gz", "", ("sm_90",), "causal_conv1d", "", kind=StepKind.SOURCE_BUILD)]
    hub = Report("hub", None, None, "train")
    hub.plan = [Step("kernels-community/fla", "missing", "hub", "kernels-community/fla@v2", "no build variant",
                     rejected=(Rejected("torch29-cu128", "Torch version", kind=RejectKind.HUB_VARIANT),),
                     kind=StepKind.HUB),
                Step("kernels-community/mamba-ssm", "skipped", "hub", "kernels-community/mamba-ssm@v5", "offline",
                     "kernelcheck hub --prefetch", kind=StepKind.HUB)]
    for rep in (inst, hub):
        data = json.loads(render_json(rep))
        back = Report.from_json(data)
        assert back.plan == rep.plan and render_json(back) == render_json(rep)
    data = json.loads(render_json(hub))
    assert [list(s) for s in data["plan"]] == [["package", "action", "source", "spec", "reason", "rejected"],
                                               ["package", "action", "source", "spec", "reason", "command"]]
    assert data["plan"][0]["rejected"] == [{"candidate": "torch29-cu128", "reason": "Torch version"}]
    assert json.loads(render_json(inst))["plan"][0]["rejected"][1]["kind"] == "release-missing"


def test_the_h200s_step_report_reads_back_and_its_lines_are_made_again_from_its_values() -> None:
    """The real `verify --model qwen3.8-27b --step --tokens 8192` report of the H200
    (docs/measurements/2026-12-04-h200-differential-step-costs-ba5a1a9, step4: 2.73x at 4 layers), recorded before the
    step section was typed: its JSON reads back byte for byte, and the step lines it printed are made again, word for
    word, from the typed values."""
    from kernelcheck.report import live_text
    from kernelcheck.report.step import PathMeasured, StepSection
    from kernelcheck.verify.step import live_items

    raw = (DATA / "verify_step_h200.json").read_text()
    data = json.loads(raw)
    rep = Report.from_json(data)
    assert json.loads(render_json(rep)) == data
    assert isinstance(rep.step, StepSection) and rep.step.tokens == 8192
    assert isinstance(rep.step.fast, PathMeasured) and isinstance(rep.step.reference, PathMeasured)
    assert round(rep.step.reference.step_ms / rep.step.fast.step_ms, 2) == 2.73
    assert live_text.lines(live_items(rep.step, verbose=False)) == data["live"]["lines"]


@pytest.mark.parametrize(("archive", "count"),
                         [("2026-12-04-h200-differential-2ef81b4/differential-2ef81b4.tgz", 16),
                          ("2026-12-05-h100-differential-0af8bbf/differential-0af8bbf-h100.tgz", 44)])
def test_every_report_of_the_gpu_differential_reads_back_typed_and_renders(archive: str, count: int) -> None:
    """The doctor and verify reports the GPU machines printed: docs/measurements/2026-12-04-h200-differential-2ef81b4
    (H200, 4 rows x 2 modes) and docs/measurements/2026-12-05-h100-differential-0af8bbf (H100, all 11 rows x 2
    modes, after the typed benchmark/timing/StepRow change): real GPUs, drivers, nvcc, kernel packages, Hub
    sections, live lines. Each reads back typed, writes the same JSON, decides the exit code it printed, and renders."""
    import tarfile

    with tarfile.open(REPO_DOCS / "measurements" / archive) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith(("doctor-train.json", "doctor-infer.json",
                                                                     "verify-train.json", "verify-infer.json"))]
        assert len(members) == count
        for m in members:
            fh = tar.extractfile(m)
            assert fh is not None
            data = json.loads(fh.read())
            rep = Report.from_json(data)
            assert rep.environment is not None and rep.environment.gpus[0].capability.sm == "sm_90", m.name
            assert json.loads(render_json(rep)) == data, m.name
            assert rep.exit_code == data["exit_code"], m.name  # decided again from the typed statuses
            assert render_text(rep, verbose=False)  # the typed values render (the wording: the samples above)


def test_the_h100s_benchmark_and_step_reports_read_back_typed() -> None:
    """docs/measurements/2026-12-05-h100-typed-live-5297a57: `verify --shape full --benchmark --tokens 8192 --mode
    train` and `verify --step` as the H100 printed them after the benchmark, timing and step values were typed: the
    benchmark is a BenchmarkRan whose passes carry the measured ratios (GDN layer fwd+bwd 14.66x), the step a
    StepSection (3.21x), and both write the same JSON byte for byte."""
    from kernelcheck.report.live_details import BenchmarkRan, PathTimed
    from kernelcheck.report.step import PathMeasured, StepSection

    bench = json.loads((REPO_DOCS / "measurements" / TYPED_LIVE / "verify-benchmark-h100.json").read_text())
    rep = Report.from_json(bench)
    assert json.loads(render_json(rep)) == bench and rep.exit_code == 0
    assert rep.live is not None and rep.live.details is not None
    b = rep.live.details.benchmark
    assert isinstance(b, BenchmarkRan) and b.main == "forward+backward" and set(b.passes) == {"forward",
                                                                                            "forward+backward"}
    main = b.passes["forward+backward"]
    assert isinstance(main.fast, PathTimed) and isinstance(main.reference, PathTimed)
    assert main.speedup == round(main.reference.ms / main.fast.ms, 2) == 14.66
    assert (main.fast.kernels, main.reference.kernels) == (112, 5976)
    step = json.loads((REPO_DOCS / "measurements" / TYPED_LIVE / "verify-step-h100.json").read_text())
    srep = Report.from_json(step)
    assert json.loads(render_json(srep)) == step and srep.exit_code == 0
    assert isinstance(srep.step, StepSection) and isinstance(srep.step.fast, PathMeasured)
    assert isinstance(srep.step.reference, PathMeasured)
    assert round(srep.step.reference.step_ms / srep.step.fast.step_ms, 2) == 3.21
