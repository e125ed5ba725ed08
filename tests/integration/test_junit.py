"""`--junit FILE`: one test case per function, so CI dashboards show which kernel failed and why.

Real runs of the CLI on this CPU machine (where the Gated DeltaNet kernels cannot run: exit 3), plus
reports built from the real dataclasses for what this machine cannot produce (a broken kernel, a
ready verdict, verify's evidence). Every file is validated against the JUnit schema CI systems read
(tests/data/junit.xsd) with the xmlschema package, installed into the test cache.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from kernelcheck.core.environment import PackageState
from kernelcheck.core.status import Finding, FunctionStatus
from kernelcheck.report import junit
from kernelcheck.report.model import Report
from kernelcheck.report.sections import EnvironmentView
from kernelcheck.report.text import render_text
from tests import envs
from tests.environments import make_env, model_ref

XSD = Path(__file__).resolve().parents[1] / "data" / "junit.xsd"
ENV = EnvironmentView.of(replace(
    make_env(python="3.12.3", transformers="5.17.0", nvcc=None, gpu_source="torch"),
    packages={"fla": PackageState("fla", True, "0.6.0", "fla-core", True, None),
              "causal_conv1d": PackageState("causal_conv1d", True, "1.7.0", "causal-conv1d", False,
                                            "undefined symbol: _ZN3c10")}))
MODEL = model_ref()


@pytest.fixture(scope="module")
def schema():
    site = envs.site("xmlschema==4.3.2", deps=True)
    import sys

    sys.path.insert(0, str(site))
    try:
        import xmlschema

        return xmlschema.XMLSchema(str(XSD))
    finally:
        sys.path.remove(str(site))


def _valid(schema, path_or_root) -> ET.Element:
    root = path_or_root if isinstance(path_or_root, ET.Element) else ET.parse(path_or_root).getroot()
    errors = list(schema.iter_errors(ET.tostring(root, encoding="unicode")))
    assert not errors, f"not valid JUnit: {errors[0]}"
    return root


def _cases(root: ET.Element) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in root.iter("testcase")}


def _outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


def _counts_match(root: ET.Element) -> None:
    suite = root.find("testsuite")
    cases = list(suite.iter("testcase"))
    for node in (root, suite):
        assert int(node.get("tests")) == len(cases)
        assert int(node.get("failures")) == sum(_outcome(c) == "failure" for c in cases)
        assert int(node.get("errors")) == sum(_outcome(c) == "error" for c in cases)
    assert int(suite.get("skipped")) == sum(_outcome(c) == "skipped" for c in cases)


# ---- the real CLI on this machine -------------------------------------------------------------------

def test_doctor_junit_one_case_per_function_on_this_cpu_machine(tmp_path, schema):
    out = tmp_path / "reports" / "kernelcheck.xml"  # the folder does not exist yet: --junit makes it
    res = envs.run(["doctor", "--model", "qwen3.8-27b", "--mode", "train", "--junit", str(out)])
    assert res.returncode == 3, res.stderr
    verdict_line = render_text(Report("doctor", {}, None, "train", [FunctionStatus("f", "p", "fallback", "i")]))
    assert verdict_line.splitlines()[-1] in res.stdout.splitlines()  # the text report still goes to stdout
    root = _valid(schema, out)
    _counts_match(root)
    suite = root.find("testsuite")
    assert suite.get("name") == "kernelcheck.doctor.Qwen_Qwen3_8-27B"
    cases = _cases(root)
    assert set(cases) == {"chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "causal_conv1d_fn",
                          "causal_conv1d_update", "attention:sdpa"}
    assert {c.get("classname") for c in cases.values()} == {"kernelcheck.doctor.Qwen_Qwen3_8-27B"}
    # Prefill kernels fail (the torch path would run), decode kernels are skipped in train, sdpa passes.
    fail = cases["chunk_gated_delta_rule"].find("failure")
    assert fail.get("type") == "fallback"
    assert "flash-linear-attention is not installed" in fail.get("message")
    assert "fix: kernelcheck install --model qwen3.8-27b" in fail.get("message")
    impl = "implementation: transformers.models.qwen3_5.modeling_qwen3_5.torch_chunk_gated_delta_rule"
    assert impl in fail.text  # wording: renderer test
    assert _outcome(cases["causal_conv1d_fn"]) == "failure"
    skipped = cases["fused_recurrent_gated_delta_rule"].find("skipped")
    assert skipped is not None and skipped.get("message").startswith("not used in mode train")
    assert _outcome(cases["attention:sdpa"]) == "passed"
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["exit_code"] == "3" and props["verdict"] == "fallback"
    assert props["torch"].endswith("+cpu") and props["torch.cuda"] == "none (CPU build)"
    assert props["gpus"] == "none" and props["model.id"] == "Qwen/Qwen3.8-27B"
    assert props["package.fla"] == "absent"
    assert "verdict: FALLBACK" in suite.find("system-out").text  # wording: renderer test


def test_infer_mode_turns_decode_kernels_into_failures(tmp_path, schema):
    out = tmp_path / "infer.xml"
    res = envs.run(["doctor", "--model", "qwen3.8-27b", "--mode", "infer", "--junit", str(out)])
    assert res.returncode == 3, res.stderr
    root = _valid(schema, out)
    _counts_match(root)
    cases = _cases(root)
    assert _outcome(cases["fused_recurrent_gated_delta_rule"]) == "failure"
    assert _outcome(cases["causal_conv1d_update"]) == "failure"
    assert root.find("testsuite").get("skipped") == "0"


def test_json_and_junit_together_keep_stdout_pure_json(tmp_path, schema):
    out = tmp_path / "k.xml"
    code, data = envs.run_json(["doctor", "--model", "mamba2", "--junit", str(out)])
    assert code == data["exit_code"] == 3
    root = _valid(schema, out)
    failing = {c.get("name") for c in root.iter("testcase") if _outcome(c) == "failure"}
    expected = {f["name"] for f in data["functions"] if f["status"] != "fast" and f.get("used", True)}
    assert failing == expected and failing
    assert root.find("testsuite").get("name") == "kernelcheck.doctor.mamba2"


def test_bad_input_still_leaves_a_junit_file_with_the_reason(tmp_path, schema):
    out = tmp_path / "bad.xml"
    res = envs.run(["doctor", "--model", "no-such-model-xyz", "--junit", str(out)])
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    root = _valid(schema, out)
    _counts_match(root)
    (case,) = list(root.iter("testcase"))
    err = case.find("error")
    # the paragraph the terminal shows (its words: test_doctor.py test_unknown_alias_suggests_closest)
    assert err.get("type") == "bad-input" and err.get("message") and err.get("message") in res.stderr
    assert root.find("testsuite").get("name") == "kernelcheck.doctor.no-such-model-xyz"


def test_unwritable_junit_path_is_bad_input_not_a_traceback(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    res = envs.run(["doctor", "--model", "qwen3.8-27b", "--junit", str(blocker / "sub" / "k.xml")])
    assert res.returncode == 2
    assert "cannot write the JUnit file" in res.stderr and "Traceback" not in res.stderr  # wording: renderer test


# ---- reports this machine cannot produce, built from the real dataclasses ----------------------------

def _report(functions, findings=(), command="doctor", mode="train") -> Report:
    return Report(command, ENV, MODEL, mode, list(functions), list(findings))


def test_broken_ready_and_evidence_from_verify(schema):
    fns = [
        FunctionStatus("chunk_gated_delta_rule", "fla-core", "broken", "fla.ops.gated_delta_rule.chunk",
                       "fla#640: wrong gradients on sm_90 with triton 3.6.0", "pip install 'triton>=3.7.1'",
                       "prefill", evidence={"implementation_called": "fla.ops.gated_delta_rule.chunk",
                                            "kernels": ["chunk_gated_delta_rule_fwd_kernel", "chunk_bwd_dqkwg"],
                                            "calls": 2}),
        FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fast", "causal_conv1d.causal_conv1d_fn", phase="prefill",
                       evidence={"kernels": ["causal_conv1d_fwd_kernel"], "calls": 1}),
    ]
    rep = _report(fns, command="verify")
    assert rep.exit_code == 4
    root = _valid(schema, junit.build(rep))
    _counts_match(root)
    cases = _cases(root)
    assert cases["chunk_gated_delta_rule"].get("classname") == "kernelcheck.verify.Qwen_Qwen3_8-27B"
    fail = cases["chunk_gated_delta_rule"].find("failure")
    assert fail.get("type") == "broken"
    assert fail.get("message") == ("broken: fla#640: wrong gradients on sm_90 with triton 3.6.0 | "
                                   "fix: pip install 'triton>=3.7.1'")
    assert "kernels: chunk_gated_delta_rule_fwd_kernel, chunk_bwd_dqkwg" in fail.text  # wording: renderer test
    assert "implementation_called: fla.ops.gated_delta_rule.chunk" in fail.text  # wording: renderer test
    ok = cases["causal_conv1d_fn"]
    assert _outcome(ok) == "passed"
    assert "kernels: causal_conv1d_fwd_kernel" in ok.find("system-out").text  # wording: renderer test
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["gpus"] == "NVIDIA H200 (sm_90)" and props["exit_code"] == "4"
    assert props["package.causal_conv1d"] == "causal-conv1d 1.7.0 (import fails: undefined symbol: _ZN3c10)"


def test_all_fast_is_a_green_file():
    rep = _report([FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fast", "causal_conv1d.causal_conv1d_fn")],
                  [Finding("kernels-window", "info", "only informative")])
    assert rep.exit_code == 0
    root = junit.build(rep)
    assert root.get("failures") == "0" and root.get("errors") == "0" and root.get("tests") == "1"


def test_findings_fold_into_their_function_or_stand_alone(schema):
    """A broken finding that names a passing function fails that function's case; one that names no
    function of the report becomes its own case; warnings never fail: failures match the exit code."""
    fns = [FunctionStatus("chunk_gated_delta_rule", "fla-core", "fast", "fla.ops.chunk_gated_delta_rule",
                          phase="prefill"),
           FunctionStatus("attention:sdpa", "torch", "fast", "sdpa", phase="attention")]
    findings = [Finding("fla-640", "broken", "backward of chunk_gated_delta_rule is wrong on Hopper",
                        "pip install -U fla-core", "fla#640", ("chunk_gated_delta_rule",)),
                Finding("driver-too-old", "broken", "driver 525 is older than CUDA 13 needs", "upgrade the driver"),
                Finding("maybe", "warning", "may apply", None, None, ("attention:sdpa",))]
    rep = _report(fns, findings)
    assert rep.exit_code == 4
    root = _valid(schema, junit.build(rep))
    _counts_match(root)
    cases = _cases(root)
    fail = cases["chunk_gated_delta_rule"].find("failure")
    assert fail.get("type") == "broken"
    assert fail.get("message").startswith("broken [fla-640]: backward of chunk_gated_delta_rule is wrong")
    assert "fix: pip install -U fla-core" in fail.get("message")
    assert "ref: fla#640" in fail.text  # wording: renderer test
    loose = cases["finding:driver-too-old"].find("failure")
    assert loose.get("type") == "broken" and "upgrade the driver" in loose.get("message")
    assert _outcome(cases["attention:sdpa"]) == "passed"
    assert root.get("failures") == "2"


def test_unsupported_used_function_fails_like_the_exit_code_says(schema):
    """On a build machine without --arch, a bound kernel is 'unsupported' (no device); doctor exits 3,
    so the case must fail (type 'unsupported') rather than hide as skipped behind a red job."""
    rep = _report([FunctionStatus("causal_conv1d_fn", "causal-conv1d", "unsupported", "causal_conv1d.causal_conv1d_fn",
                                  "bound to causal-conv1d, but no CUDA GPU is visible", "run on a machine with a GPU")])
    assert rep.exit_code == 3
    root = _valid(schema, junit.build(rep))
    fail = _cases(root)["causal_conv1d_fn"].find("failure")
    assert fail.get("type") == "unsupported" and "no CUDA GPU is visible" in fail.get("message")


def test_control_characters_and_local_model_names_stay_valid_xml(tmp_path, schema):
    rep = _report([FunctionStatus("causal_conv1d_fn", "causal-conv1d", "fallback", "torch",
                                  "import failed: \x1b[31mbad\x00 byte", None)])
    rep.model = model_ref("./models/my.model/", "/abs/models/my.model", source="local")
    path = junit.write(rep, tmp_path / "x.xml")
    root = _valid(schema, path)
    assert root.find("testsuite").get("name") == "kernelcheck.doctor.my_model"
    assert "\x1b" not in path.read_text(encoding="utf-8")


def test_environment_only_run_has_one_case(schema):
    rep = Report("doctor", ENV, None, None)
    root = _valid(schema, junit.build(rep))
    (case,) = list(root.iter("testcase"))
    assert case.get("name") == "doctor" and case.get("classname") == "kernelcheck.doctor.environment"


def test_the_schema_check_really_rejects_bad_files(schema):
    """Guards the guard: a file without counts, or with a negative count, is not valid JUnit."""
    root = junit.build(Report("doctor", ENV, None, None))
    del root.find("testsuite").attrib["failures"]
    assert list(schema.iter_errors(ET.tostring(root, encoding="unicode")))
    root = junit.build(Report("doctor", ENV, None, None))
    root.find("testsuite").set("tests", "-1")
    assert list(schema.iter_errors(ET.tostring(root, encoding="unicode")))


def test_verify_junit_carries_the_observed_evidence(tmp_path, schema):
    """verify (real layers under the profiler, here on the CPU): each case holds what was observed."""
    out = tmp_path / "verify.xml"
    res = envs.run(["verify", "--model", "qwen3.8-27b", "--junit", str(out)])
    assert res.returncode == 3, res.stderr[-2000:]
    root = _valid(schema, out)
    _counts_match(root)
    assert root.find("testsuite").get("name") == "kernelcheck.verify.Qwen_Qwen3_8-27B"
    fail = _cases(root)["chunk_gated_delta_rule"].find("failure")
    assert fail.get("type") == "fallback" and "the torch reference ran" in fail.get("message")
    called = "implementation_called: transformers.models.qwen3_5.modeling_qwen3_5.torch_chunk_gated_delta_rule"
    assert called in fail.text  # wording: renderer test
    assert "gpu_kernels: 0" in fail.text and "device: cpu" in fail.text  # wording: renderer test
