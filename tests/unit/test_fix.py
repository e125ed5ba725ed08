"""A fix is a value (core/fix.py): its text is what a report prints, its command, note and environment change are read
from it once; a fix read back from a report's JSON is the fix built in-process, and doctor/fixcheck.py reads the
change from the value."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck.core import decide, matrix
from kernelcheck.core.fix import Change, Fix
from kernelcheck.core.status import Finding, FunctionStatus
from kernelcheck.doctor import fixcheck
from kernelcheck.report.model import Report, render_json
from tests.unit import test_fixcheck as cases


def test_a_fix_is_its_printed_text_and_its_parts() -> None:
    fix = Fix("pip install 'fla-core>=0.6.0' tilelang  (or allow a triton change: triton>=3.7.1)")
    assert fix == "pip install 'fla-core>=0.6.0' tilelang  (or allow a triton change: triton>=3.7.1)"
    assert json.dumps({"fix": fix}) == json.dumps({"fix": str(fix)}) and f"{fix}" == str(fix)
    assert fix.command == "pip install 'fla-core>=0.6.0' tilelang"
    assert fix.note == "(or allow a triton change: triton>=3.7.1)"
    assert fix.change == Change("pip install 'fla-core>=0.6.0' tilelang",
                                install=(("fla-core", "0.6.0"), ("tilelang", None)))
    uninstall = Fix("pip uninstall -y fla-core Flash_Linear.Attention; then rerun")
    assert uninstall.command == "pip uninstall -y fla-core Flash_Linear.Attention" and uninstall.note == "; then rerun"
    assert uninstall.change == Change(uninstall.command, uninstall=("fla-core", "flash-linear-attention"))
    assert Fix("python -m pip install triton").change == Change("python -m pip install triton",
                                                                install=(("triton", None),))


def test_a_fix_that_is_no_pip_command_has_no_change_but_keeps_its_command_and_note() -> None:
    gpu = Fix("kernelcheck install --model M --source build, or run on a GPU")
    assert (gpu.command, gpu.note, gpu.change) == ("kernelcheck install --model M --source build",
                                                   ", or run on a GPU", None)
    assert Fix("run on a machine with an NVIDIA GPU").note == ""
    assert Fix("pip install 'unclosed").change is None  # not a command a shell reads
    assert Fix("pip install not//a//requirement").change is None
    assert Fix("").change is None and Fix.of(None) is None


def test_of_keeps_a_fix_as_it_is_and_makes_text_a_fix() -> None:
    fix = Fix("pip install triton")
    assert Fix.of(fix) is fix
    made = Fix.of("pip install triton")
    assert type(made) is Fix and made == fix


NAMES = st.from_regex(r"[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,4})?", fullmatch=True)
VERSIONS = st.none() | st.from_regex(r"[0-9]{1,2}\.[0-9]{1,2}(\.[0-9]{1,2})?", fullmatch=True)
NOTES = st.sampled_from(["", "  (or allow a triton change: triton>=3.7.1)", " (on CPU-only machines)",
                         ", or run on a GPU", "; restart the job"])


@settings(max_examples=120, deadline=None)
@given(specs=st.lists(st.tuples(NAMES, VERSIONS), min_size=1, max_size=4), op=st.sampled_from([">=", "=="]),
       note=NOTES)
def test_a_change_printed_as_a_command_reads_back_as_the_same_change(specs: list[tuple[str, str | None]], op: str,
                                                                    note: str) -> None:
    """The round trip fixcheck relies on when it merges two installs (`_combine`): the command it prints for a
    Change is read back as that Change, whatever words follow it."""
    command = "pip install " + " ".join(shlex.quote(f"{n}{op}{v}" if v else n) for n, v in specs)
    change = Change(command, install=tuple(specs))
    fix = Fix(command + note)
    assert fix.change == change and fix.command == command and fix.note == note.strip()
    assert Fix(fix.command).change == change  # the command alone is the same change


def _report(functions: list[FunctionStatus], findings: list[Finding]) -> Report:
    return Report("doctor", None, None, "train", functions, findings)


def test_a_fix_read_back_from_a_reports_json_is_the_fix_built_in_process() -> None:
    """The fixes fixcheck prints for the CPU case (a qualified `pip install triton`) and the H200 one (a merged
    `pip install triton tilelang`): the JSON prints each as its text, and Report.from_json gives back equal Fix
    values with the same command, note and change."""
    functions, findings = [], []
    for state in (cases._state(cases._env(None)), cases._state(cases._env("9.0"), pinned="3.6.0")):
        fns, fds = cases._printed(state)
        functions += fns
        findings += fds
    built = _report(functions, findings)
    printed = render_json(built)
    back = Report.from_json(json.loads(printed))
    assert render_json(back) == printed
    fixes = [(a.fix, b.fix) for a, b in zip(built.functions, back.functions, strict=True) if a.fix is not None]
    fixes += [(a.fix, b.fix) for a, b in zip(built.findings, back.findings, strict=True) if a.fix is not None]
    assert {a for a, _ in fixes} >= {"pip install triton tilelang"}
    for a, b in fixes:
        assert isinstance(a, Fix) and isinstance(b, Fix) and a == b
        assert (a.command, a.note, a.change) == (b.command, b.note, b.change)
    assert Fix.of(json.loads(printed)["functions"][0]["fix"]) == functions[0].fix


def test_every_record_that_holds_a_fix_holds_a_fix_value() -> None:
    text = "pip install triton"
    fs = FunctionStatus("f", "fla-core", "fallback", "torch_f", "why", text)
    rule = decide.RuleEvidence("r", "broken", "t", "m", text, ("f",))
    decided = decide.decide(replace(fs, fix=None), rules=[rule])
    for fix in (fs.fix, Finding("x", "info", "m", text).fix, rule.fix, decided.fix,
                decide.CheckedFix(text, text, "").fix, decide.Observation({}, "torch", 1, "f", fix=text).fix):
        assert type(fix) is Fix and fix == text


class _Counted(Fix):
    """A Fix that counts how often its change is read."""

    reads = 0

    @property
    def change(self) -> Change | None:
        _Counted.reads += 1
        return Fix(str(self)).change


def test_fixcheck_reads_the_change_from_the_value_it_is_given() -> None:
    state = cases._state(cases._env(None))
    plain = fixcheck.check(Fix(cases.TRITON_FIX), state, cases.M)
    _Counted.reads = 0
    counted = fixcheck.check(_Counted(cases.TRITON_FIX), state, cases.M)
    assert _Counted.reads >= 1 and counted == plain
    assert counted.fix is not None and counted.fix.startswith("on a machine with an NVIDIA GPU")


def test_the_shipped_fixes_of_pip_commands_parse_as_installs_or_uninstalls() -> None:
    """Every fix in breakages.toml that starts with pip names what it installs or removes (fixcheck can simulate
    it); a placeholder is filled as the rules fill it."""
    m = matrix.load()
    fill = {"model": "M", "dist": "fla-core", "package": "fla", "triton": "3.6.0", "torch": "2.11.0", "cap": "sm_90"}
    texts = [*(b.fix for b in m.breakages), *(r.fix for r in (*m.import_errors, *m.runtime_errors))]
    pips = [Fix(t.format_map(_Blank(fill))) for t in texts if t.startswith("pip ")]
    assert pips
    for fix in pips:
        assert fix.change is not None, fix
        assert fix.change.install or fix.change.uninstall, fix


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return key
