"""The job's --collator, run in a child process of its own (packing/batchfile.py `collate`): the job's code (its
module's import and its call) may call sys.exit or os._exit, raise a BaseException, or never return, and none of
that may decide kernelcheck's exit code or hang it. The child writes `result.json` (`{"ok": true}` or
`{"error": message}`) and, on success, the checked batch as `batch.pt` (torch.save of tensors and ints, read back
with weights_only=True); anything else (no result) is the parent's to report.

    python -c 'import kernelcheck.packing.collate_child as c; c.main()' FOLDER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _answer(folder: Path, result: dict[str, Any]) -> None:
    (folder / "result.json").write_text(json.dumps(result), encoding="utf-8")


def main() -> None:
    folder = Path(sys.argv[1])
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    sys.path[:] = job["sys_path"]
    try:
        _answer(folder, _run(folder, job))
    except SystemExit as exc:
        _answer(folder, {"exited": repr(exc.code)})
    except BaseException as exc:  # noqa: BLE001 - the job's code may raise anything
        _answer(folder, {"raised": f"{type(exc).__name__}: {exc}"[:300]})
    sys.stdout.flush()
    sys.stderr.flush()
    import os

    os._exit(0)  # the job's module may have left threads or atexit hooks: they do not run


def _run(folder: Path, job: dict[str, Any]) -> dict[str, Any]:
    import random
    from collections.abc import Mapping

    from kernelcheck.core.errors import BadInput
    from kernelcheck.packing import batchfile

    spec, lengths = job["spec"], job["lengths"]
    try:
        fn = batchfile.collator(spec)
    except BadInput as exc:
        return {"error": exc.message}
    gen, vocab = random.Random(int(job["seed"])), int(job["vocab"])  # torch is imported by check(), after the call
    feats = [{"input_ids": [gen.randrange(vocab) for _ in range(n)]} for n in lengths]
    try:
        raw = fn(feats)
    except Exception as exc:  # noqa: BLE001 - the job's code
        return {"error": f"--collator {spec} raised on {len(lengths)} examples of lengths {lengths[:8]}"
                         f"{'...' if len(lengths) > 8 else ''} ({type(exc).__name__}: {exc}). Nothing was run."}
    try:
        checked = batchfile.check(dict(raw) if isinstance(raw, Mapping) else raw, f"--collator {spec}")
    except BadInput as exc:
        return {"error": exc.message}
    import torch

    torch.save(checked.tensors, folder / "batch.pt")
    return {"ok": True}
