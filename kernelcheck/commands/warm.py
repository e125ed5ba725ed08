"""`kernelcheck warm`: compile the job's fast path into a cache folder an image can ship, with the keys it depends on.

warm/run.py runs the model's real layers in child processes whose environment points every JIT into DIR and writes
DIR's manifest; `--print-env` only prints the variables that lead a job's JITs to DIR (nothing runs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kernelcheck.commands.context import Context
from kernelcheck.core.errors import BadInput
from kernelcheck.core.outcome import Outcome
from kernelcheck.core.status import Mode, Verdict


@dataclass(frozen=True)
class Request:
    """warm's options: the model, mode, shapes (tiny, full or both), tokens, the folder, --compile (Inductor too),
    --packing (verify --packing's measurement too), --print-env (only the variables)."""

    model: str | None
    cache_dir: str
    mode: str = Mode.TRAIN
    shapes: tuple[str, ...] = ("tiny",)
    tokens: int | None = None
    compile: bool = False
    packing: bool = False
    print_env: bool = False


@dataclass(frozen=True)
class WarmRun:
    """What `kernelcheck warm` did (`result` None with --print-env) and the env lines for the job."""

    cache_dir: str
    env: list[str]
    verdict: Verdict
    result: Any = None  # warm/run.py WarmResult
    table: Any = None  # matrix/jit_caches.toml

    def to_json(self) -> dict[str, Any]:
        from kernelcheck import schemas
        from kernelcheck.core.status import EXIT_CODE

        r = self.result
        m = r.manifest if r is not None else None
        return {"schema": schemas.schema_id("warm"), "command": "warm", "verdict": self.verdict,
                "exit_code": EXIT_CODE[self.verdict], "cache_dir": self.cache_dir, "env": self.env,
                "device": r.device if r is not None else None, "error": r.error if r is not None else None,
                "manifest": m.to_json() if m is not None else None,
                "fresh_process_added": r.rechecked if r is not None else None,
                "notes": r.notes if r is not None else []}

    def render(self, as_json: bool) -> str:
        if as_json:
            return json.dumps(self.to_json(), indent=2)
        if self.result is None:
            return "\n".join(self.env)
        from kernelcheck.warm import render

        return "\n".join([*render.lines(self.result, self.table),
                          f"verdict: {self.verdict.upper()} (exit {self.to_json()['exit_code']})"])


def check(req: Request, ctx: Context) -> dict[str, Any] | None:
    """Every usage rule of warm, found before any child starts: the model (only --print-env runs without one), the
    mode, the shapes and tokens; the children's spec (None with --print-env)."""
    from kernelcheck.commands import usage
    from kernelcheck.warm import run as warm_run

    if req.print_env:
        return None
    if not req.model:
        raise BadInput("warm needs --model (the model whose fast path to compile); only --print-env runs without "
                       "one.")
    usage.mode(req.mode)
    spec = warm_run.spec_of(req.model, req.mode, req.shapes, req.tokens, req.compile, req.packing)
    usage.model(req.model, ctx.matrix)
    return spec


def run(req: Request, ctx: Context) -> Outcome[WarmRun]:
    spec = check(req, ctx)
    from kernelcheck.core import version
    from kernelcheck.doctor import cacheproof
    from kernelcheck.warm import run as warm_run

    table = ctx.matrix.table(cacheproof.TABLE)
    if spec is None:  # --print-env
        try:
            manifest: cacheproof.Manifest | None = cacheproof.read(req.cache_dir)
        except BadInput:
            manifest = None  # not warmed yet: the variables for the folder, as warm will write them
        lines = cacheproof.env_lines(req.cache_dir, manifest, table, req.compile)
        return Outcome(WarmRun(req.cache_dir, lines, Verdict.READY), Verdict.READY)

    def say(line: str) -> None:
        ctx.sink(f"kernelcheck warm: {line}")

    result = warm_run.warm(spec, req.cache_dir, table, version.__version__, say)
    verdict = Verdict.BROKEN if result.error else Verdict.READY
    return Outcome(WarmRun(result.cache_dir, result.env, verdict, result, table), verdict)
