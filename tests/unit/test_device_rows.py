"""The function rows, the fla backend section, the rules' `cuda_gpu` and the fallback cost, judged for the
verdict's device (core/device.py) with what is installed: a CUDA prediction on a machine without a GPU is judged
for the CUDA device; a CPU verdict keeps the CPU's answers, GPU here or not."""

from __future__ import annotations

from kernelcheck.core import decide, matrix, rules
from kernelcheck.core import device as device_mod
from kernelcheck.core.device import Device
from kernelcheck.core.status import Finding, FunctionStatus, Severity, Status
from kernelcheck.doctor import backends, cost, provider
from kernelcheck.doctor.run import function_statuses
from kernelcheck.integrations.transformers import Binding, BindingResult
from kernelcheck.report.model import Report
from kernelcheck.report.sections import EnvironmentView
from tests.environments import make_env, model_ref

M = matrix.load()
MODULE = "transformers.models.qwen3_5.modeling_qwen3_5"
CHUNK = "chunk_gated_delta_rule"
FLA_IMPL = "fla.ops.gated_delta_rule.chunk.chunk_gated_delta_rule"


def _bound_to_fla() -> BindingResult:
    """transformers 5.25's decorator binding of chunk_gated_delta_rule to the installed fla."""
    b = Binding(CHUNK, "fla", "package", FLA_IMPL, "decorator", extra={"attribute": f"torch_{CHUNK}"})
    return BindingResult("decorator", MODULE, {CHUNK: b})


def _row(env, device: Device) -> FunctionStatus:  # type: ignore[no-untyped-def]
    (fs,) = function_statuses(None, _bound_to_fla(), env, "infer", "qwen3.8-27b", M,  # type: ignore[arg-type]
                              device=device)
    report = Report("doctor", EnvironmentView.of(env), None, "infer", functions=[fs])
    provider.apply_builds(report, env, M)
    return report.functions[0]


def test_a_cuda_torch_build_without_a_gpu_names_the_package_that_runs_on_the_cuda_device():
    """The default prediction of a CUDA build with no GPU here (a login node): fla runs there, so the row's code and
    provider are fla's, not the torch function this CPU would take; not fast until the GPU is named."""
    env = make_env(None, transformers="5.25.0", fla="0.6.0")
    dev = device_mod.choose(env)
    assert (dev.type, dev.origin, dev.visible) == ("cuda", "torch-build", False)
    fs = _row(env, dev)
    assert (fs.status, fs.implementation, fs.provider) == ("unsupported", FLA_IMPL, "pip:fla-core 0.6.0")
    assert fs.fix is not None and "--arch" in fs.fix
    assert device_mod.gpu_unnamed(dev, env) and not device_mod.gpu_unnamed(Device("cpu", "flag", True), env)


def test_a_named_gpu_on_a_cuda_torch_build_is_judged_fast_with_the_pip_provider():
    env = make_env("9.0", transformers="5.25.0", fla="0.6.0")  # --arch 9.0: GPUs from the override
    dev = device_mod.choose(env)
    assert (dev.type, dev.origin, dev.predicted) == ("cuda", "arch", True)
    fs = _row(env, dev)
    assert (fs.status, fs.implementation, fs.provider) == ("fast", FLA_IMPL, "pip:fla-core 0.6.0")


def test_a_cpu_verdict_takes_the_torch_path_even_with_a_gpu_here_and_says_here_at_most_once():
    env = make_env("9.0", transformers="5.25.0", fla="0.6.0", gpu_source="torch")  # an H200 here
    fs = _row(env, Device("cpu", "flag", True))  # --device cpu
    assert (fs.status, fs.implementation, fs.provider) == ("unsupported", f"{MODULE}.torch_{CHUNK}", "torch")
    no_gpu = make_env(None, transformers="5.25.0", fla="0.6.0")
    fs = _row(no_gpu, Device("cpu", "flag", True))
    assert (fs.status, fs.provider) == ("unsupported", "torch")
    assert fs.reason is not None and fs.reason.count("here") <= 1, fs.reason  # the word was doubled


def test_a_cpu_torch_build_runs_no_cuda_kernel_on_the_cuda_gpu_either():
    env = make_env("9.0", torch="2.13.0+cpu", cuda=None, transformers="5.25.0", fla="0.6.0")  # --arch on a CPU build
    dev = device_mod.choose(env)
    assert dev.type == "cuda" and not device_mod.runs_cuda_kernels(dev, env)
    fs = _row(env, dev)
    assert (fs.status, fs.provider) == ("unsupported", "torch")


def test_the_cpu_crash_rule_follows_the_verdicts_device_not_the_gpus_here():
    env = make_env(None, transformers="5.24.0", fla="0.6.0")  # a CUDA build, no GPU here

    def hit(cuda: bool | None) -> bool:
        facts = rules.Facts(env=env, mode="infer", bound=frozenset({"fla"}), functions=(CHUNK,), cuda=cuda)
        return any(h.rule.id == "fla-cpu-crash" and h.certain for h in rules.evaluate(facts, M))

    assert hit(False) and hit(None)  # the CPU verdict, and callers that do not say: the GPUs here decide
    assert not hit(True)  # the CUDA prediction: fla runs on the GPU there


def _fs(name: str, status: str, package: str = "fla-core") -> FunctionStatus:
    return FunctionStatus(name, package, status, "x", None, None, "prefill")


def test_the_fla_backend_section_is_for_the_verdicts_device():
    arch = make_env("9.0", fla="0.6.0")
    data, found = backends.section(arch, device_mod.choose(arch), [_fs(CHUNK, "fast")], "train", M)
    assert data is not None and [f.id for f in found] == ["fla-backend"]
    assert "not on this machine" in found[0].message  # a prediction says so (wording: once, here)
    here = make_env("9.0", fla="0.6.0", gpu_source="torch")
    assert backends.section(here, Device("cpu", "flag", True), [_fs(CHUNK, "fast")], "train", M) == (None, [])
    assert backends.section(here, device_mod.choose(here), [_fs(CHUNK, "fast")], "train", M)[0] is not None


def _cost_report(*functions: FunctionStatus) -> Report:
    report = Report("doctor", EnvironmentView.of(make_env("9.0")), model_ref(), "train", functions=list(functions))
    report.findings.append(Finding("x", Severity.INFO, "x"))
    return report


def test_the_fallback_cost_prices_only_the_functions_that_take_the_torch_path():
    fla = decide.decide(_fs(CHUNK, "unsupported"), build=decide.Build("fla-core", "0.6.0"))
    report = _cost_report(fla)  # FALLBACK, but the package runs on the CUDA device: no torch path to price
    assert report.verdict == "fallback"
    cost.attach(report, "qwen3.8-27b", m=M)
    assert "fallback-cost" not in {f.id for f in report.findings}
    fast = decide.decide(_fs(CHUNK, "fast"), build=decide.Build("fla-core", "0.6.0"))
    conv = decide.decide(_fs("causal_conv1d_fn", "fallback", "causal-conv1d"), build=decide.TORCH)
    report = _cost_report(fast, conv)
    cost.attach(report, "qwen3.8-27b", m=M)
    (found,) = [f for f in report.findings if f.id == "fallback-cost"]
    assert found.functions == ("causal_conv1d_fn",)
    assert "fla-core still run" in found.message  # the measurement is all-torch: an upper bound (wording: here)
    assert decide.TORCH.provider == conv.provider == "torch" and fast.status == Status.FAST
