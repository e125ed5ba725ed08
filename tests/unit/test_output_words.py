"""Words a user reads, tested once at their renderer: the trace's launch delay beside its busy verdict, the
packing line, and an install that had nothing to change."""

from __future__ import annotations

from kernelcheck.core.status import Finding, FunctionStatus
from kernelcheck.report.model import Report


def test_a_short_launch_delay_says_the_gpu_waited_only_where_the_trace_is_launch_bound() -> None:
    from types import SimpleNamespace

    from kernelcheck.report.trace import LaunchDelay
    from kernelcheck.trace.render import _delay_lines

    s = SimpleNamespace(launch_delay_us=LaunchDelay(p50=30.0, p90=60.0, max=60.0, count=40))  # a StepRow's field
    busy = " ".join(_delay_lines(s, launch_bound=False))
    assert "waited for the CPU" not in busy and "not launch-bound" in busy
    assert "waited for the CPU" in " ".join(_delay_lines(s, launch_bound=True))


def test_the_undeclared_packing_line_says_each_mode_and_what_happens_in_words() -> None:
    from kernelcheck.packing.findings import undeclared_message
    from kernelcheck.report.sections import ModeOutcome

    modes = {m: ModeOutcome(m, o, "why", None) for m, o in (("none", "correct"), ("position_ids", "mixed"),
                                                             ("cu_seq_lens", "raises"), ("flash", "raises"))}
    line = undeclared_message(modes)
    assert "position_ids only (TRL padding_free): sequences mix silently (wrong results)" \
        in line  # wording: renderer test
    assert "cu_seq_lens + seq_idx: the step raises ValueError" in line  # wording: renderer test
    assert "no packing (one sequence per row): correct" in line  # wording: renderer test
    assert "--packing none|position_ids|cu_seq_lens|flash" in line  # wording: renderer test


def test_an_install_with_nothing_to_change_says_so_once() -> None:
    from kernelcheck.core.plan_step import Step, StepKind
    from kernelcheck.install import command, plan_types, wheels
    from tests.environments import make_view, model_ref

    env = make_view(None, python="3.11.7", python_tag="cp311", torch="2.14.1+cu130")
    fs = [FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fast", "causal_conv1d.causal_conv1d_fn")]
    before = Report("doctor", env, model_ref("m", "m", source="x"), "train", fs,
                    [Finding("bound-at-import", "info", "bound once")])
    report = Report("install", env, before.model, "train")
    keep = Step("causal-conv1d", "keep", "installed", "causal-conv1d==1.7.0", "already installed",
                kind=StepKind.INSTALLED)
    target = wheels.WheelFit("cp311", "linux_x86_64", "2.14", 13, True, ("9.0",))
    plan = plan_types.Plan((keep,), target, blocked=False)
    outcome = command._unchanged(report, before, plan, "--arch")
    rep, code = outcome.report, outcome.exit_code
    text = command.render(outcome, dry_run=False)
    assert code == 0 and "install-nothing-to-change" in [f.id for f in rep.findings]
    lines = text.splitlines()
    assert "installed for" not in text and sum(ln.startswith("verdict") for ln in lines) == 1  # wording: renderer test
    assert lines.count("functions") == 1
    assert text.splitlines()[-1] == "verdict (nothing to change): READY (exit 0)"
