"""Record two real profiler traces of ONE Qwen3.8-27B Gated DeltaNet layer: fast path and torch fallback.

Run on a CUDA machine with fla-core and causal-conv1d importable (the fast child checks this):

    python benchmarks/record_gdn_traces.py --out tests/data/gpu

It spawns itself twice. The "fast" child imports transformers normally, so transformers binds fla's
chunk_gated_delta_rule and causal_conv1d_fn. The "fallback" child blocks `fla` and `causal_conv1d` before
transformers is imported (None in sys.modules, which makes importlib.util.find_spec() answer None and
`import fla` raise ModuleNotFoundError, plus a sys.meta_path finder refusing their submodules), so
transformers binds its torch reference functions - exactly what a user without the packages gets.

Each child builds `Qwen3_5GatedDeltaNet` (transformers.models.qwen3_5.modeling_qwen3_5) from a
Qwen3_5TextConfig of Qwen3.8-27B's linear-attention shape (hidden 5120, 16 key heads, 48 value heads, head
dims 128, conv kernel 4), bf16, layer_idx 0, warms it up (Triton compile + autotune happen here, not in
the trace), then records one ProfilerStep of a forward pass over 1 x --seq tokens (a prefill; fla's
backward raises on Hopper with triton < 3.7.1, fla#640, so forward-only keeps both paths comparable) and
writes gdn_fast.json.gz / gdn_fallback.json.gz plus a small .meta.json (versions, which implementation
transformers bound, timings). Finally it runs kernelcheck's trace analysis on both and prints the verdicts.

On a CPU machine, `--device cpu --tiny` runs the same logic with a tiny config (for testing the script).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.abc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BLOCKED = ("fla", "causal_conv1d", "causal_conv1d_cuda")


class _Blocker(importlib.abc.MetaPathFinder):
    """Refuse the kernel packages (and their submodules), as if they were not installed."""

    def find_spec(self, name, path=None, target=None):  # importlib protocol
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named '{name}' (blocked by record_gdn_traces.py)", name=name)
        return None


def block_kernel_packages() -> None:
    """Make fla and causal_conv1d unavailable to this process. Call before importing transformers."""
    for name in list(sys.modules):
        if name.split(".")[0] in BLOCKED:
            del sys.modules[name]
    for name in BLOCKED:
        sys.modules[name] = None  # type: ignore[assignment]  # find_spec -> None, import -> ModuleNotFoundError
    sys.meta_path.insert(0, _Blocker())


def _config(tiny: bool):
    from transformers import Qwen3_5TextConfig

    if tiny:
        return Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=2,
                                 linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                                 linear_conv_kernel_dim=4, layer_types=["linear_attention", "full_attention"])
    # Qwen3.8-27B's Gated DeltaNet shape (docs/facts.md section 1); one layer only.
    return Qwen3_5TextConfig(hidden_size=5120, intermediate_size=17408, num_hidden_layers=4,
                             num_attention_heads=24, num_key_value_heads=4, head_dim=256,
                             linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128,
                             linear_value_head_dim=128, linear_conv_kernel_dim=4,
                             layer_types=["linear_attention"] * 3 + ["full_attention"])


def _bound(modeling) -> dict[str, str]:
    """Which implementation transformers bound for each fast function (>= 5.15: the decorator's closure)."""
    import inspect

    out = {}
    for attr in ("torch_chunk_gated_delta_rule", "causal_conv1d_fn"):
        fn = getattr(modeling, attr, None)
        if fn is None:
            continue
        try:
            impl = inspect.getclosurevars(fn).nonlocals.get("implementation")
        except (TypeError, ValueError):
            impl = None
        out[attr] = f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', '?')}" if impl else "unknown"
    return out


def child(mode: str, out_dir: Path, seq: int, device: str, tiny: bool, steps: int, warmup: int,
          with_stack: bool) -> None:
    if mode == "fallback":
        block_kernel_packages()
    elif device == "cuda":
        try:
            import causal_conv1d  # noqa: F401
            import fla.ops.gated_delta_rule  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            sys.exit(f"fast child: fla / causal_conv1d do not import ({type(exc).__name__}: {exc}). Install the "
                     "wheels and put them on PYTHONPATH (pip install --no-index --no-deps --target /tmp/site ...; "
                     "export PYTHONPATH=/tmp/site) before running this script.")
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    from transformers.models.qwen3_5 import modeling_qwen3_5 as modeling

    bound = _bound(modeling)
    if mode == "fast" and device == "cuda":
        torch_bound = [k for k, v in bound.items() if v.startswith("transformers.")]
        if torch_bound:
            sys.exit(f"fast child: transformers bound its torch path for {torch_bound} although fla and "
                     f"causal_conv1d import ({bound}); this transformers does not use them, so a 'fast' trace "
                     "would not be fast. Use a transformers whose bindings work (kernelcheck doctor says which).")
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    cfg = _config(tiny)
    layer = modeling.Qwen3_5GatedDeltaNet(cfg, layer_idx=0).to(device=device, dtype=dtype).eval()
    x = torch.randn(1, seq, cfg.hidden_size, device=device, dtype=dtype)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(warmup):  # Triton JIT compile + autotune, cuBLAS heuristics: outside the trace
            layer(x)
        sync()
    warm_s = time.perf_counter() - t0
    times = []
    trace_path = out_dir / f"gdn_{mode}.json.gz"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad(), profile(activities=activities, with_stack=with_stack,
                                  schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                                  on_trace_ready=lambda p: p.export_chrome_trace(str(trace_path))) as prof:
        for _ in range(1 + steps):
            t = time.perf_counter()
            layer(x)
            sync()
            times.append((time.perf_counter() - t) * 1e3)
            prof.step()
    meta = {
        "mode": mode, "device": device, "seq": seq, "tiny": tiny, "steps": steps, "with_stack": with_stack,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "transformers": __import__("transformers").__version__,
        "bound": bound, "warmup_s": round(warm_s, 2), "step_ms": [round(t, 3) for t in times],
        "blocked": list(BLOCKED) if mode == "fallback" else [],
        "trace": trace_path.name, "trace_bytes": trace_path.stat().st_size if trace_path.exists() else None,
    }
    (out_dir / f"gdn_{mode}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder for gdn_fast.json.gz and gdn_fallback.json.gz")
    ap.add_argument("--seq", type=int, default=8192, help="tokens in the prefill (default 8192, as measured)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true", help="tiny config (CPU test of this script)")
    ap.add_argument("--steps", type=int, default=1, help="profiler steps to record (default 1)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--with-stack", action="store_true", help="also record Python stacks (bigger traces)")
    ap.add_argument("--only", choices=["fast", "fallback"], default=None, help="record one path only")
    ap.add_argument("--child", choices=["fast", "fallback"], default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.child:
        child(a.child, a.out, a.seq, a.device, a.tiny, a.steps, a.warmup, a.with_stack)
        return 0
    rc = 0
    for mode in ([a.only] if a.only else ["fast", "fallback"]):
        cmd = [sys.executable, __file__, "--child", mode, "--out", str(a.out), "--seq", str(a.seq),
               "--device", a.device, "--steps", str(a.steps), "--warmup", str(a.warmup)]
        cmd += ["--tiny"] if a.tiny else []
        cmd += ["--with-stack"] if a.with_stack else []
        print(f"== recording {mode}: {' '.join(cmd)}", flush=True)
        t = time.perf_counter()
        res = subprocess.run(cmd, env=dict(os.environ))
        print(f"== {mode}: exit {res.returncode} after {time.perf_counter() - t:.0f} s", flush=True)
        rc = rc or res.returncode
    if rc:
        return rc
    # Check what was written with kernelcheck's own analysis (this checkout's kernelcheck).
    sys.path.insert(0, str(REPO))
    from kernelcheck.core import matrix
    from kernelcheck.trace import analysis as trace_mod

    for mode in ([a.only] if a.only else ["fast", "fallback"]):
        p = a.out / f"gdn_{mode}.json.gz"
        with gzip.open(p, "rb") as fh:
            raw = len(fh.read())
        an = trace_mod.analyze_file(p, m=matrix.load())
        s = an.summary
        print(f"{p.name}: {p.stat().st_size / 1e6:.2f} MB gzip ({raw / 1e6:.1f} MB raw), steps "
              f"{[st.name for st in an.steps]}, cpu_ops {s.cpu_ops}, kernels {s.kernels}, busy "
              f"{(s.busy_fraction or 0):.0%}, diagnosis {an.verdict}, missing {list(an.missing_packages)}, "
              f"fast packages {list(an.fast_packages)}")
        if p.stat().st_size > 3e6:
            print(f"   note: {p.name} is over 3 MB; rerun with a smaller --seq to commit it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
