"""A hand count of one profiled step, to check `kernelcheck trace FILE --budget` against: the trace's events in a
plain loop (json.load, no kernelcheck code), the op-class rules written out by hand, the GPU timeline's gaps split
into host sync waits (a gap that began as a synchronize call returned) and GPU idle. Prints, per class, the hand
count next to the budget's and the difference; exit 1 when a class differs by more than 2% (and 0.05 ms).

    python benchmarks/budget_handcount.py TRACE BUDGET.json   # BUDGET.json: trace --budget --json (or verify's)
    python benchmarks/budget_handcount.py TRACE               # the hand count alone

tests/unit/test_budget.py checks the recorded H200 step with it; benchmarks/gpu/gpu_budget.sh checks the step it
records.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

RANGE_BY_HAND: tuple[tuple[str, Callable[[str], bool]], ...] = (  # innermost open one wins
    ("optimizer", lambda n: n.startswith(("Optimizer.step#", "Optimizer.zero_grad#"))
     or n == "kernelcheck::phase::optimizer"),
    ("gdn", lambda n: "ChunkGatedDeltaRuleFunction" in n or n.startswith("kernelcheck::chunk_gated_delta_rule::")),
    ("short_conv", lambda n: n.startswith("kernelcheck::causal_conv1d_fn::")),
    ("norms", lambda n: any(k in n for k in ("RsqrtBackward", "PowBackward", "MeanBackward"))),
    ("loss", lambda n: n in ("aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax", "aten::nll_loss",
                             "aten::nll_loss_nd") or "LogSoftmaxBackward" in n or "NllLossBackward" in n),
)
KERNEL_BY_HAND: tuple[tuple[str, tuple[str, ...]], ...] = (  # first hit wins
    ("optimizer", ("FusedOptimizerTensorListMetadata",)),
    ("gdn", ("gated_delta_rule", "chunk_fwd_kernel_o", "chunk_bwd_kernel", "recompute_w_u", "prepare_wy_repr",
             "chunk_local_cumsum", "l2norm_fwd", "l2norm_bwd")),
    ("short_conv", ("causal_conv1d", "conv_depthwise")),
    ("attention", ("sdpa", "flash_fwd", "flash_bwd", "cudnn::fusion::compute_dot_do_o", "cudnn::fusion::convert_dq",
                   "cudnn::fusion::fmha")),
    ("gemm", ("nvjet_", "gemm", "splitKreduce", "xmma", "trsm")),  # trsm: cuBLAS batch_trsm_left_kernel
    ("norms", ("pow_tensor_scalar_kernel", "MeanOps", "rsqrt_kernel")),
    ("loss", ("cunn_SoftMax", "nll_loss")),
    ("copies", ("Memcpy", "Memset", "copy_kernel", "CatArrayBatchedCopy", "FillFunctor")),
    ("elementwise", ("elementwise", "reduce_kernel", "Functor", "gather", "scatter", "compute_grad_weight",
                     "RadixSort", "DeviceScan", "DeviceCompact", "DeviceUniqueByKey", "krn_partial",
                     "compute_num_of_partial_segments", "arange", "multi_tensor_apply_kernel")),
)


def _events(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return data["traceEvents"] if isinstance(data, dict) else data


def hand_count(path: Path) -> tuple[str, float, dict[str, float]]:
    """(the longest step's name, its GPU time in ms, ms per class) by a plain loop over the trace's events."""
    events = _events(path)
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    step = max(steps, key=lambda e: e["dur"])
    s0, s1 = step["ts"], step["ts"] + step["dur"]
    launch = {e["args"]["correlation"]: e["ts"] + e["dur"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
              and any(k in e["name"] for k in ("aunch", "emcpy", "emset"))}
    syncs = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "ynchronize" in e["name"]]
    ranges = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
              and any(hit(e["name"]) for _, hit in RANGE_BY_HAND)]  # the ranges a hand rule names
    out: defaultdict[str, float] = defaultdict(float)
    spans = []
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        t = launch.get(e.get("args", {}).get("correlation"))
        when = t if t is not None else e["ts"]
        if not s0 <= when <= s1:
            continue
        cls = None
        if t is not None:
            open_ = sorted((r for r in ranges if r["ts"] <= t <= r["ts"] + r["dur"]), key=lambda r: -r["ts"])
            cls = next((c for r in open_ for c, hit in RANGE_BY_HAND if hit(r["name"])), None)
        if cls is None:
            cls = next((c for c, subs in KERNEL_BY_HAND if any(s in e["name"] for s in subs)), "unclassified")
        out[cls] += e["dur"]
        spans.append((e["ts"], e["ts"] + e["dur"]))
    lo, hi = min([s0, *(a for a, _ in spans)]), max([s1, *(b for _, b in spans)])
    cur = lo
    for a, b in [*sorted(spans), (hi, hi)]:
        if a > cur:
            after_sync = any(s <= cur + 5 and e - 200 <= cur <= e + 5 for s, e in syncs)
            out["host_sync" if after_sync else "idle"] += a - cur
        cur = max(cur, b)
    return step["name"], (hi - lo) / 1e3, {k: v / 1e3 for k, v in out.items()}


def _budget_step(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The budget's table of the step `name` (the longest of that name) from a report's JSON or a budget."""
    b = report.get("budget", report)
    paths = b.get("paths", {"": b})
    budget = paths.get("fast") or paths.get("trace") or next(iter(paths.values()))
    steps = [s for s in budget["steps"] if s["name"] == name]
    return max(steps, key=lambda s: s["gpu_time_ms"]) if steps else None


def main(argv: list[str]) -> int:
    name, gpu_ms, hand = hand_count(Path(argv[1]))
    st = _budget_step(json.loads(Path(argv[2]).read_text()), name) if len(argv) > 2 else None
    print(f"{name}: {gpu_ms:,.3f} ms of GPU time by hand" + (f", {st['gpu_time_ms']:,.3f} by the budget" if st else ""))
    measured = {r["id"]: r["measured_ms"] for r in st["classes"]} if st else {}
    if st:
        measured["unclassified"] = st["unclassified"]["ms"]
    worst = 0.0
    for cid in sorted({*hand, *measured}, key=lambda c: -hand.get(c, 0.0)):
        h, m = hand.get(cid, 0.0), measured.get(cid)
        if m is None:
            print(f"  {cid:<14} {h:>10.3f} ms")
            continue
        diff = (m - h) / h if h else (0.0 if abs(m) <= 0.05 else float("inf"))
        if abs(m - h) > 0.05:
            worst = max(worst, abs(diff))
        print(f"  {cid:<14} {h:>10.3f} ms by hand {m:>10.3f} ms budget {diff:+8.2%}")
    if st:
        print(f"worst class difference {worst:.2%} ({'within' if worst <= 0.02 else 'OUTSIDE'} 2%)")
    return 0 if worst <= 0.02 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
