"""`kernelcheck trace FILE --annotate OUT.json`: the trace written back with kernelcheck's findings in it.

Each finding becomes an instant event (`"ph": "i"`, Chrome trace / Perfetto format) named
`kernelcheck: <id>` with the message in `args`, placed where it applies: a fallback signature at the
first kernel (or Python frame) of its evidence in each step it matched, a launch-bound finding at the
start of each launch-bound step, everything else at the start of the trace (global scope). The input's
events are streamed through unchanged (plain or gzip in, gzip out when OUT ends in .gz).
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from kernelcheck.core import matrix
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Severity
from kernelcheck.trace.reader import TraceReader
from kernelcheck.trace.results import TraceAnalysis

log = logging.getLogger(__name__)


def _instant(name: str, ts: float, message: str, severity: str, scope: str = "g", tid: Any = 0,
             pid: Any = 0) -> dict[str, Any]:
    return {"ph": "i", "s": scope, "name": f"kernelcheck: {name}", "ts": ts, "pid": pid, "tid": tid,
            "cat": "kernelcheck", "args": {"severity": severity, "message": message}}


class _Places:
    """Where each finding goes: collected from the events while they stream through."""

    def __init__(self, an: TraceAnalysis, sig: matrix.TraceSignatures):
        self.patterns: dict[str, list[str]] = {}
        for s in sig.signatures:
            if any(m.id == s.id for m in an.fallbacks):
                self.patterns[s.id] = [p for g in s.kernels for p in g.patterns] + list(s.python_functions)
        self.step_names = {st.name for st in an.steps}
        self.lb = set(an.launch_bound_steps)
        self.first_ts: float | None = None
        self.steps: list[tuple[float, float, str, Any, Any]] = []
        self.hits: dict[str, list[tuple[float, Any, Any]]] = {k: [] for k in self.patterns}

    def see(self, ev: Mapping[str, Any]) -> None:
        ts, name, dur = ev.get("ts"), ev.get("name"), ev.get("dur")
        if not isinstance(ts, (int, float)) or not isinstance(name, str):
            return
        if self.first_ts is None or ts < self.first_ts:
            self.first_ts = float(ts)
        if name in self.step_names and ev.get("cat") == "user_annotation":
            dur = dur if isinstance(dur, (int, float)) else 0
            self.steps.append((float(ts), float(ts) + float(dur), name, ev.get("pid"), ev.get("tid")))
        if ev.get("cat") not in ("kernel", "python_function"):
            return
        for sid, pats in self.patterns.items():
            if len(self.hits[sid]) < 1000 and any(fnmatch.fnmatchcase(name, p) for p in pats):
                self.hits[sid].append((float(ts), ev.get("pid"), ev.get("tid")))

    def events(self, an: TraceAnalysis) -> list[dict[str, Any]]:
        t0 = self.first_ts or 0.0
        out: list[dict[str, Any]] = []
        fallback_ids = {m.id for m in an.fallbacks}
        for fd in an.findings:
            if fd.id in fallback_ids and self.hits.get(fd.id):
                out.extend(self._per_step(fd.id, fd.message, fd.severity, self.hits[fd.id]))
            elif fd.id == "launch-bound" and self.steps:
                out.extend(_instant(fd.id, s0, fd.message, fd.severity, "p", tid, pid)
                           for s0, _, n, pid, tid in self.steps if n in self.lb)
            else:
                out.append(_instant(fd.id, t0, fd.message, fd.severity))
        said = f"kernelcheck trace verdict: {an.verdict.upper()} ({an.diagnosis})"
        out.append(_instant("verdict", t0, said, Severity.INFO))
        return out

    def _per_step(self, sid: str, msg: str, sev: str, hits: list[tuple[float, Any, Any]]) -> Iterator[dict[str, Any]]:
        hits = sorted(hits, key=lambda h: h[0])
        done: set[str] = set()
        for ts, pid, tid in hits:
            step = next((n for s0, s1, n, _, _ in self.steps if s0 <= ts <= s1), "trace")
            if step in done:
                continue
            done.add(step)
            yield _instant(sid, ts, msg, sev, "t", tid, pid)


def _open_out(out: Path) -> IO[str]:
    try:
        if out.name.endswith(".gz"):
            return gzip.open(out, "wt", encoding="utf-8")
        return open(out, "w", encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--annotate {out}: cannot write it ({exc.strerror or exc}).") from None


def annotate(src: str | os.PathLike[str], out: str | os.PathLike[str], an: TraceAnalysis, *,
             sig: matrix.TraceSignatures) -> int:
    """Write `src`'s events plus the findings as instant events to `out`, each placed by its signature's patterns
    (`sig`, a Matrix's signatures); returns how many were added."""
    out_p = Path(out)
    if out_p.resolve() == Path(src).resolve():
        raise BadInput(f"--annotate {out}: that is the input trace; give another file name.")
    places = _Places(an, sig)
    reader = TraceReader(Path(src))
    n_added = 0
    with _open_out(out_p) as fh:
        fh.write('{"traceEvents": [\n')
        first = True
        for ev in reader.events():
            places.see(ev)
            fh.write(("" if first else ",\n") + json.dumps(ev, separators=(",", ":")))
            first = False
        for ev in places.events(an):
            fh.write(("" if first else ",\n") + json.dumps(ev, separators=(",", ":")))
            first = False
            n_added += 1
        fh.write("\n]")
        for k, v in reader.metadata.items():
            fh.write(f",\n{json.dumps(k)}: {json.dumps(v)}")
        fh.write("}\n")
    log.info("annotated %s -> %s with %d instant events", src, out, n_added)
    return n_added
