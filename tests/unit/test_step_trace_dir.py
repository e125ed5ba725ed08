"""`verify --step --trace-dir DIR` where DIR holds a `"`: the step worker's trace is read and the step is not BROKEN.

torch.profiler (Kineto) writes the trace's own path into the trace unescaped (`"traceName": "/x/a"b/t.json"`),
so a trace written into such a folder is not JSON, and the worker's reading of it raised: its result became an
error and verify said `verify-step-failed` (BROKEN) for a step that ran. The worker now writes into the run's own
folder (`step.worker_trace`) and the trace is moved to --trace-dir after (`step.keep_trace`).

A real CPU trace from the worker's own profiling code (`step_worker._profiled`, the real `_Trainer` on a
two-parameter stand-in for the model: seconds, not the ~200 s of a full `verify --step`), read with the worker's
own reading (`step_worker.analysed`, the code of `kernelcheck trace`). The control: the same trace written
straight into the `"` folder is refused by that reading, which is the failure the path choice avoids."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")  # the worker's own schedule

from kernelcheck.core import matrix  # noqa: E402
from kernelcheck.core.errors import BadInput  # noqa: E402
from kernelcheck.verify import step, step_worker  # noqa: E402


class _TinyLM(torch.nn.Module):  # what _Trainer calls: lm(input_ids=, labels=, use_cache=).loss
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Linear(32, 32)

    def forward(self, input_ids: Any, labels: Any, use_cache: bool) -> SimpleNamespace:
        x = torch.nn.functional.one_hot(input_ids % 32, 32).float()
        return SimpleNamespace(loss=(self.w(x) @ self.w.weight).square().mean())


def _profile_into(trace: Path) -> None:
    ids = torch.arange(16).unsqueeze(0)
    step_worker._profiled(step_worker._Trainer(_TinyLM(), ids, "cpu", False), "cpu", 1, trace)


def test_a_quote_in_trace_dir_keeps_the_trace_readable_and_the_step_not_broken(tmp_path: Path):
    m = matrix.load()
    run_dir, keep = tmp_path / "run", tmp_path / 'traces "quoted"'
    run_dir.mkdir()
    keep.mkdir()

    trace = step.worker_trace(run_dir, "fast")  # where verify_step tells the worker to write
    assert keep not in trace.parents and '"' not in str(trace)
    _profile_into(trace)
    result: dict[str, Any] = step_worker.analysed(trace, m=m)  # raised here before: the step was BROKEN
    assert result["trace"]["profiled_steps"] == 1 and result["breakdown"]["profiled_steps"] == 1
    assert {"forward", "backward", "optimizer"} <= set(result["breakdown"]["phases"])

    step.keep_trace(run_dir, keep, "fast", result)
    kept = Path(result["trace_file"])
    assert kept.parent == keep and kept.is_file() and not trace.exists()
    assert step_worker.analysed(kept, m=m)["trace"] == result["trace"]  # --budget reads the kept trace

    failed = {"error": "the worker failed"}  # a path that did not run keeps no trace
    step.keep_trace(run_dir, keep, "reference", failed)
    assert "trace_file" not in failed


def test_control_the_same_trace_written_into_the_quoted_folder_does_not_parse(tmp_path: Path):
    keep = tmp_path / 'a"b'
    keep.mkdir()
    _profile_into(keep / "step-fast.json.gz")
    with pytest.raises(BadInput, match="not a readable Chrome trace"):
        step_worker.analysed(keep / "step-fast.json.gz", m=matrix.load())
