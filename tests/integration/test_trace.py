"""kernelcheck trace: real traces recorded here with torch.profiler (CPU), GPU-shaped event lists for the
parts a CPU cannot record (kernels, launches), and the command's text, JSON and exit codes.

The GPU verdict itself is proven on real H200 traces in test_trace_gpu.py.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcheck.core import matrix
from kernelcheck.trace import analysis as tr
from tests import envs
from tests.unit.test_report_readback import rendered

M = matrix.load()  # the shipped matrix: its signatures judge each trace

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------------
# real CPU traces of a tiny Qwen3.5 (Gated DeltaNet + attention) training step


def _record(out: Path, *, steps: int = 3, with_stack: bool = False, seq: int = 32) -> dict:
    """Record `steps` ProfilerSteps of forward+backward of the smallest Qwen3.5 in a subprocess.

    Returns what the profiler itself says (key_averages counts) for comparison with the trace analysis.
    """
    code = f"""
import json, torch
from transformers import AutoModelForCausalLM, Qwen3_5TextConfig
from torch.profiler import ProfilerActivity, profile, schedule
cfg = Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=16, linear_value_head_dim=16, layer_types=["linear_attention", "full_attention"])
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(cfg)
x = torch.randint(0, 128, (1, {seq}))
# CUDA is asked for as users do; on this CPU-only machine the profiler records CPU only.
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack={with_stack},
             schedule=schedule(wait=0, warmup=1, active={steps}, repeat=1),
             on_trace_ready=lambda p: p.export_chrome_trace({str(out)!r})) as prof:
    for _ in range({steps} + 1):
        model(x, labels=x).loss.backward()
        prof.step()
ka = {{e.key: e.count for e in prof.key_averages()}}
print(json.dumps(ka))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory) -> tuple[Path, Path, dict]:
    d = tmp_path_factory.mktemp("cpu-trace")
    plain = d / "step.json"
    ka = _record(plain)
    gz = d / "step.json.gz"
    with open(plain, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return plain, gz, ka


def test_cpu_trace_counts_match_the_profiler(cpu_trace):
    plain, _, ka = cpu_trace
    code, rep = envs.run_json(["trace", str(plain)])
    assert code == 0, rep
    assert rep["command"] == "trace" and rep["verdict"] == "ready" and rep["exit_code"] == 0
    s = rep["summary"]
    # The trace holds every cpu_op event; key_averages folds a call into its same-named single child
    # (aten::div -> aten::div), so the trace count is at least the profiler's and only slightly above.
    ka_ops = sum(c for k, c in ka.items() if not k.startswith("ProfilerStep"))
    assert ka_ops > 1000
    assert ka_ops <= s["cpu_ops"] <= ka_ops * 1.05, (s["cpu_ops"], ka_ops)
    with open(plain) as fh:
        raw = json.load(fh)["traceEvents"]
    assert s["cpu_ops"] == sum(1 for e in raw if e.get("cat") == "cpu_op")
    for op in s["top_ops_by_count"]:
        assert op["count"] >= ka.get(op["name"], 0) > 0, op
    assert s["kernels"] == 0 and s["memcpy"] == 0 and s["memset"] == 0
    # three ProfilerSteps (the warmup step is not exported), all ops inside them, equal op counts
    steps = rep["steps"]
    assert [st["name"] for st in steps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert ka["ProfilerStep*"] == 3
    assert sum(st["cpu_ops"] for st in steps) == s["cpu_ops"]
    assert len({st["cpu_ops"] for st in steps}) == 1  # the same step three times
    assert all(st["cpu_span_us"] > 0 for st in steps)
    assert rep["trace"]["cpu_only"] is True
    assert [f["id"] for f in rep["findings"]] == ["trace-cpu-only"]


def test_cpu_trace_text_and_gzip(cpu_trace):
    plain, gz, _ = cpu_trace
    res = envs.run(["trace", str(gz), "-o", str(gz.parent / "r.json")], env={"COLUMNS": "100"})  # piped
    assert res.returncode == 0, res.stderr
    rep = json.loads((gz.parent / "r.json").read_text())  # the same run's values
    assert [s["name"] for s in rep["steps"]] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert rep["trace"]["cpu_only"] is True and rep["trace"]["gzip"] is True and rep["verdict"] == "ready"
    # the text is the renderers' from those values (their words: tests/unit/test_report_readback.py's samples)
    assert res.stdout == rendered(rep)
    # gzip and plain give the same numbers
    a, b = tr.analyze_file(plain, m=M), tr.analyze_file(gz, m=M)
    assert a.summary == b.summary and a.steps == b.steps and b.gzip and not a.gzip
    # events already in memory (what verify passes) give the same analysis
    with open(plain) as fh:
        doc = json.load(fh)
    c = tr.analyze_events(doc.pop("traceEvents"), doc, m=M)
    assert c.summary == a.summary and c.steps == a.steps and c.verdict == a.verdict == "ready"
    assert a.diagnosis == "healthy"


def test_kernel_names_from_the_h200_are_recognised():
    """The kernel names of docs/facts.md section 6, as the profiler writes them, against matrix/signatures.toml."""
    fast = {
        "fla": ["chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "chunk_gated_delta_rule_fwd_kkt_solve_kernel",
                "chunk_fwd_kernel_o", "chunk_local_cumsum_scalar_kernel", "l2norm_fwd_kernel",
                "recompute_w_u_fwd_kernel"],
        "causal_conv1d": ["void causal_conv1d_channellast_fwd_kernel<Causal_conv1d_channellast_fwd_kernel_traits<128, "
                          "4, 4, true, c10::BFloat16, c10::BFloat16> >(ConvParamsBase)"],
    }
    slow = ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
            "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3",
            "void at::native::triu_tril_kernel<bool, long, true, 4, true>(at::cuda::detail::TensorInfo<bool, long>)",
            "void at::native::conv_depthwise2d_forward_kernel<1, c10::BFloat16, int>(...)"]
    for pkg, names in fast.items():
        for n in names:
            g = Gpu()
            g.launch(n, 0, 5, 10)
            assert tr.analyze_events(g.events, m=M).fast_packages == (pkg,), n
    g = Gpu()
    for i, n in enumerate(slow):
        g.launch(n, 20 * i, 20 * i + 5, 10)
    assert tr.analyze_events(g.events, m=M).fast_packages == ()


def test_python_stack_names_the_torch_path_on_cpu(tmp_path):
    """with_stack=True traces carry Python frames: the torch reference function is named outright. A trace with
    no GPU activity cannot say whether the job's GPU runs it (recording without ProfilerActivity.CUDA is an easy
    mistake): fallback (exit 3) with the fix to record the GPU, never ready."""
    p = tmp_path / "stack.json"
    _record(p, steps=1, with_stack=True)
    code, rep = envs.run_json(["trace", str(p)])
    assert code == rep["exit_code"] == 3 and rep["verdict"] == "fallback" and rep["trace"]["cpu_only"]
    ids = {f["id"]: f for f in rep["findings"]}
    assert "fla-torch-fallback" in ids and ids["fla-torch-fallback"]["severity"] == "info"
    torch_path = ids["trace-cpu-only-torch-path"]
    assert torch_path["severity"] == "fallback" and "ProfilerActivity.CUDA" in torch_path["fix"]
    assert "chunk_gated_delta_rule" in torch_path["functions"]
    res = envs.run(["trace", str(p)], env={"COLUMNS": "100"})
    assert res.returncode == 3 and "READY" not in res.stdout
    (sig,) = [x for x in rep["trace"]["fallback_signatures"] if x["id"] == "fla-torch-fallback"]
    assert "torch_chunk_gated_delta_rule" in sig["evidence"]
    assert rep["trace"]["missing_packages"] == []


_MAMBA = """
import sys, torch
from transformers import AutoModelForCausalLM, MambaConfig
from torch.profiler import ProfilerActivity, profile
cfg = MambaConfig(vocab_size=128, hidden_size=32, state_size=4, num_hidden_layers=1, expand=2, conv_kernel=4,
                  time_step_rank=4)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(cfg)
x = torch.randint(0, 128, (1, 16))
with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
    model(x, labels=x).loss.backward()
prof.export_chrome_trace(sys.argv[1])
"""


@pytest.mark.parametrize("version, frame", [(None, "mamba_selective_scan"), ("5.13.1", "slow_forward")])
def test_python_stack_names_the_torch_mamba1_scan_on_cpu(tmp_path, version, frame):
    """A tiny Mamba recorded with with_stack=True on this CPU: transformers' torch selective scan is named (the
    decorated mamba_selective_scan of the installed 5.24; 5.13's MambaMixer.slow_forward), as information."""
    sites = [envs.site(f"transformers=={version}", deps=True)] if version else []
    p = tmp_path / "mamba.json"
    pypath = os.pathsep.join([*map(str, sites), os.environ.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", _MAMBA, str(p)], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": pypath})
    assert res.returncode == 0, res.stderr[-3000:]
    code, rep = envs.run_json(["trace", str(p)])
    assert code == 3 and "trace-cpu-only-torch-path" in [f["id"] for f in rep["findings"]]
    (sig,) = [x for x in rep["trace"]["fallback_signatures"] if x["id"] == "mamba-ssm-torch-fallback"]
    assert sig["package"] == "mamba-ssm" and f"`{frame}` (transformers/models/mamba/modeling_mamba.py(" \
        in sig["evidence"], sig["evidence"]
    assert {f["id"]: f["severity"] for f in rep["findings"]}["mamba-ssm-torch-fallback"] == "info"


def test_empty_recording_is_bad_input(tmp_path):
    """A real pitfall: a cycling schedule clears the events, and the exported trace holds no op."""
    p = tmp_path / "empty.json"
    code = f"""
import torch
from torch.profiler import ProfilerActivity, profile, schedule
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=1)) as prof:
    for _ in range(2):
        torch.ones(4).sum()
        prof.step()
prof.export_chrome_trace({str(p)!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=300)
    res = envs.run(["trace", str(p)])
    assert res.returncode == 2
    assert "recorded nothing" in res.stderr and "on_trace_ready" in res.stderr  # wording: renderer test
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("content,words", [
    (None, "no such file"),
    (b"", "empty"),
    (b"hello, not json", "not a readable Chrome trace"),
    (b'{"schemaVersion": 1, "deviceProperties": []}', "no \"traceEvents\""),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}, {"ph": "X"', "cut short"),
])
def test_bad_files_exit_2_with_a_message(tmp_path, content, words):
    p = tmp_path / "t.json"
    if content is not None:
        p.write_bytes(content)
    for as_json in (False, True):
        res = envs.run(["trace", str(p)] + (["--json"] if as_json else []))
        assert res.returncode == 2, (res.stdout, res.stderr)
        assert words in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
        if as_json:
            assert json.loads(res.stdout)["exit_code"] == 2


def test_truncated_gzip_is_bad_input(cpu_trace, tmp_path):
    _, gz, _ = cpu_trace
    p = tmp_path / "cut.json.gz"
    p.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2])
    res = envs.run(["trace", str(p)])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "truncated" in res.stderr or "damaged" in res.stderr  # wording: renderer test


def test_reader_tolerates_layout(tmp_path, monkeypatch):
    """Unknown keys before and after traceEvents, an ERROR key (CPU-only traces), a bare array, tiny chunks."""
    from kernelcheck.trace import reader as chrome_trace

    evs = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "ts": 10.5 * i, "dur": 1.25,
            "args": {"External id": i, "weird": [1, {"x": "\u00e9"}]}} for i in range(50)]
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": evs, "traceName": "x",
           "ERROR": "CUDA not available", "baseTimeNanoseconds": 1790857026000000000}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc, indent=1))
    monkeypatch.setattr(chrome_trace, "CHUNK", 7)  # every value crosses chunk borders
    r = chrome_trace.TraceReader(p)
    assert list(r.events()) == evs
    assert r.metadata == {k: v for k, v in doc.items() if k != "traceEvents"}
    a = tr.analyze_file(p, m=M)
    assert a.summary.cpu_ops == 50 and a.metadata["error"] == "CUDA not available"
    q = tmp_path / "bare.json"
    q.write_text(json.dumps(evs))
    assert tr.analyze_file(q, m=M).summary.cpu_ops == 50


# ---------------------------------------------------------------------------------------------------
# GPU-shaped event lists (written the way torch's export_chrome_trace writes them). A CPU cannot record
# kernels; these check the arithmetic. The GPU verdict on real traces: test_trace_gpu.py.


class Gpu:
    """Builds a torch-profiler-shaped event list: CPU op -> launch (runtime/driver) -> kernel."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.corr = 0

    def step(self, n: int, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {"External id": 1}})
        self.events.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{n}", "pid": 0,
                            "tid": 7, "ts": ts + 5, "dur": dur, "args": {"External id": 1}})

    def launch(self, name: str, t_launch: float, k_start: float, k_dur: float, *, triton: bool = False,
               cat: str = "kernel", stream: int = 7) -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": 1, "tid": 1,
                            "ts": t_launch - 1, "dur": 6, "args": {"External id": self.corr}})
        rt = ("cuda_driver", "cuLaunchKernelEx") if triton else (
            "cuda_runtime", "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel")
        self.events.append({"ph": "X", "cat": rt[0], "name": rt[1], "pid": 1, "tid": 1, "ts": t_launch,
                            "dur": 4, "args": {"correlation": self.corr, "cbid": 211}})
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": k_start,
                            "dur": k_dur, "args": {"correlation": self.corr, "device": 0, "stream": stream}})
        self.events.append({"ph": "f", "id": self.corr, "pid": 0, "tid": stream, "ts": k_start, "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})


def test_busy_union_gaps_and_launch_delay():
    g = Gpu()
    g.step(1, 0, 1000)
    g.launch("void at::native::vectorized_elementwise_kernel<4>(int)", 10, 20, 100)  # delay 20-14 = 6
    g.launch("gemm_a", 30, 100, 100, stream=8)  # overlaps the first on another stream: union 20..200
    g.launch("gemm_a", 40, 300, 50)  # gap 100; delay 300-44 = 256
    g.launch("Memcpy HtoD (Pageable -> Device)", 50, 400, 10, cat="gpu_memcpy")
    g.launch("Memset (Device)", 60, 410, 1, cat="gpu_memset")
    g.launch("late_kernel", 900, 1100, 50)  # launched inside the step, runs after its CPU end
    g.launch("chunk_fwd_kernel_o", 950, 940, 10, triton=True)  # starts before its launch returns: delay 0
    a = tr.analyze_events(g.events, m=M)
    (st,) = a.steps
    assert st.name == "ProfilerStep#1"
    assert (st.kernels, st.memcpy, st.memset) == (5, 1, 1)  # gpu_user_annotation not a kernel
    assert st.gpu_busy_us == pytest.approx(180 + 50 + 50 + 10)
    assert st.idle_gaps == {"count": 3, "total_us": pytest.approx(100 + 590 + 150), "longest_us": pytest.approx(590)}
    assert st.wall_us == pytest.approx(1150)  # step start .. the late kernel's end
    assert st.launch_delay_us["count"] == 5
    assert st.launch_delay_us["max"] == pytest.approx(300 - 44)
    assert st.launch_delay_us["p50"] == pytest.approx(100 - 34)
    assert st.cpu_ops == 7 and st.launches == 6
    assert st.top_kernels_by_count[0] == {"name": "gemm_a", "count": 2, "total_us": 150}
    assert st.top_kernels_by_time[0]["name"] == "gemm_a"
    assert "late_kernel" in st.kernel_names and "Memset (Device)" not in st.kernel_names


def _fallback_step(g: Gpu, n: int, t0: float) -> float:
    """A torch-fallback GDN step: thousands of short kernels, each starting right after its launch."""
    t = t0
    names = (["void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float>>(int)"] * 6
             + ["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n"])
    g.launch("void at::native::triu_tril_kernel<bool, long, true, 4, true>(...)", t + 5, t + 12, 3)
    g.launch("void at::native::conv_depthwise2d_forward_kernel<1, c10::BFloat16, int>(...)", t + 20, t + 27, 8)
    t += 40
    for i in range(800):
        g.launch(names[i % len(names)], t, t + 7, 4)  # 4 us kernels every 12 us: ~33% busy
        t += 12
    return t


def _fast_step(g: Gpu, t0: float) -> float:
    t = t0
    for i, name in enumerate((
            "causal_conv1d_channellast_fwd_kernel<Causal_conv1d_channellast_fwd_kernel_traits<128, 4>>",
            "l2norm_fwd_kernel", "chunk_local_cumsum_scalar_kernel", "chunk_gated_delta_rule_fwd_kkt_solve_kernel",
            "recompute_w_u_fwd_kernel", "chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "chunk_fwd_kernel_o",
            "nvjet_sm90_tss_128x256_64x4_1x2_h_bz_coopA_TNT")):
        # launched ahead, queued back to back: the GPU stays busy
        g.launch(name, t + 10 * i, t + 50 + 402 * i, 400, triton="kernel" in name and "<" not in name)
    return t0 + 50 + 8 * 402


def test_fallback_signature_and_launch_bound_from_kernels(tmp_path):
    g = Gpu()
    end = _fallback_step(g, 1, 0)
    g.events.insert(0, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                        "ts": 0, "dur": end + 10, "args": {}})
    a = tr.analyze_events(g.events, m=M)
    assert a.diagnosis == "fallback"
    assert a.missing_packages == ("fla-core", "causal-conv1d")
    assert a.launch_bound_steps == ("ProfilerStep#1",)
    (st,) = a.steps
    assert st.busy_fraction == pytest.approx(802 * 4 / (end + 10), rel=0.05)
    sentence = tr.launch_bound_sentence(st)
    assert sentence.startswith("the GPU sat idle 6") and "waiting for launches" in sentence
    # the same as a file through the command: exit 3, the missing packages named
    p = tmp_path / "fallback.json.gz"
    with gzip.open(p, "wt") as fh:
        json.dump({"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200", "computeMajor": 9,
                                                             "computeMinor": 0}], "traceEvents": g.events}, fh)
    res = envs.run(["trace", str(p), "-o", str(tmp_path / "r.json")], env={"COLUMNS": "100"})  # piped
    code, rep = res.returncode, json.loads((tmp_path / "r.json").read_text())  # the same run's values
    assert code == 3 and rep["verdict"] == "fallback", res.stdout + res.stderr
    assert [g["name"] for g in rep["trace"]["gpus"]] == ["NVIDIA H200"] and rep["trace"]["launch_bound_steps"]
    # its text is the renderers' from these values (their words: tests/unit/test_report_readback.py's samples)
    assert res.stdout == rendered(rep)
    assert rep["trace"]["missing_packages"] == ["fla-core", "causal-conv1d"]
    assert {f["id"] for f in rep["findings"]} >= {"fla-torch-fallback", "causal-conv1d-torch-fallback", "launch-bound"}


def test_fast_step_is_healthy_and_conv_alone_is_not_a_fallback():
    g = Gpu()
    g.step(1, 0, 3300)
    _fast_step(g, 0)
    a = tr.analyze_events(g.events, m=M)
    assert a.verdict == "ready" and a.diagnosis == "healthy" and a.fallbacks == () and a.launch_bound_steps == ()
    assert set(a.fast_packages) == {"fla", "causal_conv1d"}
    ids = [f.id for f in a.findings]
    assert "fla-kernels-ran" in ids and "causal-conv1d-kernels-ran" in ids and "gpu-busy" in ids
    assert a.steps[0].busy_fraction > 0.9
    # a depthwise conv in a model without Gated DeltaNet (a vision tower) is not a causal-conv1d fallback
    g2 = Gpu()
    g2.step(1, 0, 100)
    g2.launch("void at::native::conv_depthwise2d_forward_kernel<1, float, int>(...)", 5, 10, 80)
    assert tr.analyze_events(g2.events, m=M).fallbacks == ()


def test_a_plain_transformer_step_is_not_a_gdn_fallback():
    """triu masks, many matmuls and elementwise kernels but no short conv: a Llama, not Gated DeltaNet."""
    g = Gpu()
    g.step(1, 0, 20000)
    g.launch("void at::native::triu_tril_kernel<float, long, true, 4, true>(...)", 5, 12, 3)
    t = 20.0
    for i in range(900):
        name = "nvjet_sm90_tss_128x256_64x4_1x2_h_bz_coopA_TNT" if i % 3 == 0 else \
            "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float>>(int)"
        g.launch(name, t, t + 7, 15)
        t += 20
    a = tr.analyze_events(g.events, m=M)
    assert a.fallbacks == () and a.diagnosis != "fallback"


def test_steps_are_judged_one_by_one():
    """Step 1 falls back, step 2 runs fla: the finding names the step, the fast kernels are noted."""
    g = Gpu()
    end = _fallback_step(g, 1, 0)
    g.events.insert(0, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                        "ts": 0, "dur": end + 10, "args": {}})
    g.step(2, end + 20, 3400)
    _fast_step(g, end + 20)
    a = tr.analyze_events(g.events, m=M)
    assert [s.name for s in a.steps] == ["ProfilerStep#1", "ProfilerStep#2"]
    fla = next(m for m in a.fallbacks if m.package == "fla")
    assert fla.steps == ("ProfilerStep#1",)
    (f,) = [f for f in a.findings if f.id == "fla-torch-fallback"]
    assert f.severity == "fallback" and set(f.functions) == set(fla.functions)
    assert a.steps[1].kernels == 8 and a.steps[0].kernels == 802


def test_cli_help_teaches():
    res = envs.run(["trace", "--help"])
    assert res.returncode == 0
    assert "export_chrome_trace" in res.stdout  # wording: the help text
    assert "kernelcheck trace step.json.gz" in res.stdout  # wording: the help text


# ---------------------------------------------------------------------------------------------------
# the GPU recording script, exercised on CPU: its fallback child must hide installed fla from transformers


@pytest.mark.slow
def test_record_script_blocks_installed_fla(tmp_path):
    site = envs.site("fla-core==0.6.0", "einops==0.8.2", "triton")
    env = {"PYTHONPATH": str(site)}
    # without the blocker, transformers binds fla's function (fla + triton import here) ...
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from transformers.models.qwen3_5 import modeling_qwen3_5 as m; "
         "sys.path.insert(0, 'benchmarks'); import record_gdn_traces as r, json; print(json.dumps(r._bound(m)))"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, **env}, timeout=600)
    bound = json.loads(probe.stdout.strip().splitlines()[-1])  # function -> the implementation transformers bound
    assert bound["torch_chunk_gated_delta_rule"].startswith("fla.ops.gated_delta_rule"), probe.stdout + probe.stderr
    # ... and the script's fallback child binds the torch reference and writes a gzip trace
    res = subprocess.run([sys.executable, "benchmarks/record_gdn_traces.py", "--out", str(tmp_path), "--device",
                          "cpu", "--tiny", "--seq", "128", "--warmup", "1", "--only", "fallback"],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, **env}, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    meta = json.loads((tmp_path / "gdn_fallback.meta.json").read_text())
    assert meta["bound"]["torch_chunk_gated_delta_rule"].endswith("modeling_qwen3_5.torch_chunk_gated_delta_rule")
    assert meta["blocked"] == ["fla", "causal_conv1d", "causal_conv1d_cuda"]
    a = tr.analyze_file(tmp_path / "gdn_fallback.json.gz", m=M)
    assert [s.name for s in a.steps] == ["ProfilerStep#1"] and a.summary.cpu_ops > 100
