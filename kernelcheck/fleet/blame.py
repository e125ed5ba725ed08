"""Blame a cluster can act on: a node's kernelcheck verdict as an NVSentinel HealthEvent and as a Health-Validation
style node verdict, so that a software fault (a stale image, a wrong venv) never drains or cordons a healthy node.

kernelcheck's verdicts are about the software on a node, never its hardware: every HealthEvent says
`isFatal: false`, `recommendedAction: NONE`, `processingStrategy: STORE_ONLY` (persist and show, change no cluster
resource) and skips quarantine and drain; the node verdict's category is `software`, its severity follows the exit
code. `ACTIONS` is the one table from exit code to what a Slurm prolog and a Kubernetes Job should do
(docs/fleet.md prints it). Field names and enum words: NVSentinel's data-models/protobufs/health_event.proto
(HealthEvent, RecommendedAction, ProcessingStrategy; protobuf's JSON names); NVIDIA Health Validation's verdict
schema (overall_severity, affected_components: category, max_severity, check_ids, entities).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kernelcheck.core.status import EXIT_BROKEN, EXIT_FALLBACK, EXIT_INTERNAL, EXIT_READY, EXIT_USAGE
from kernelcheck.fleet.record import RankRecord, RecordFunction

AGENT, CHECK = "kernelcheck", "kernelcheck-gate"
COMPONENT_CLASS = "Software"
FORMATS = ("healthevent", "nodeverdict")


@dataclass(frozen=True)
class Action:
    """What one exit code means to a cluster: the verdict word, the node verdict's severity, what Slurm and
    Kubernetes should do, and whether a retry can help."""

    verdict: str
    severity: str  # Health Validation's PASS / WARNING / CRITICAL / UNKNOWN
    slurm: str
    kubernetes: str
    retry: str


ACTIONS: dict[int, Action] = {
    EXIT_READY: Action("ready", "PASS", "run the job", "start the trainer", "-"),
    EXIT_FALLBACK: Action("fallback", "WARNING", "hold the job (scontrol hold); keep the node in service",
                          "fail the Job (podFailurePolicy FailJob); no cordon, no drain",
                          "no: the same image falls back again; fix the image or accept the slow path"),
    EXIT_BROKEN: Action("broken", "CRITICAL", "hold the job (scontrol hold); keep the node in service",
                        "fail the Job (podFailurePolicy FailJob); no cordon, no drain",
                        "no: the same image fails again; rebuild or pin the image"),
    EXIT_USAGE: Action("bad input", "UNKNOWN", "hold the job; keep the node; fix the gate's command",
                       "fail the Job (podFailurePolicy FailJob); no cordon, no drain",
                       "no: the same command is refused again"),
    EXIT_INTERNAL: Action("internal error", "UNKNOWN", "requeue the job once; keep the node",
                          "let backoffLimit retry the pod; no cordon, no drain",
                          "once: an internal error may not repeat; report it if it does"),
}


def action(code: int) -> Action:
    """The row for `code`; a code outside the contract reads as an internal error."""
    return ACTIONS.get(code, ACTIONS[EXIT_INTERNAL])


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(rec: RankRecord) -> str:
    return rec.host or rec.label or (f"rank {rec.rank}" if rec.rank is not None else "unknown")


def _at_fault(rec: RankRecord) -> list[RecordFunction]:
    """The used functions whose status is the record's verdict (none for a READY record)."""
    if rec.verdict is None or rec.exit_code == EXIT_READY:
        return []
    return [f for f in rec.functions if f.used and str(f.status) == str(rec.verdict)]


def summary_line(rec: RankRecord) -> str:
    """The verdict and the first function at fault (or the error), in one line."""
    act = action(rec.exit_code)
    if rec.stopped:
        return f"kernelcheck {act.verdict} (exit {rec.exit_code}): {rec.error}"
    bad = _at_fault(rec)
    model = rec.model.id if rec.model is not None else None
    head = f"kernelcheck {act.verdict} (exit {rec.exit_code})" + (f" for {model}" if model else "")
    if not bad:
        return head
    return f"{head}: {bad[0].name} ({bad[0].package}) {bad[0].status}: {bad[0].reason}" + (
        f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")


def health_event(rec: RankRecord, generated: str | None = None) -> dict[str, Any]:
    """An NVSentinel HealthEvent (protobuf JSON names) for one node's record: never fatal, no node action."""
    act = action(rec.exit_code)
    return {
        "version": 1, "agent": AGENT, "componentClass": COMPONENT_CLASS, "checkName": CHECK,
        "isFatal": False, "isHealthy": rec.exit_code == EXIT_READY, "message": summary_line(rec),
        "recommendedAction": "NONE",
        "errorCode": [f"kernelcheck-exit-{rec.exit_code}", *sorted({f.id for f in rec.findings if f.id})],
        "entitiesImpacted": [{"entityType": "SOFTWARE", "entityValue": f.package or f.name} for f in _at_fault(rec)],
        "metadata": {"exit_code": str(rec.exit_code), "verdict": act.verdict, "kernelcheck": rec.kernelcheck,
                     "retry": act.retry},
        "generatedTimestamp": generated or _now(), "nodeName": _node(rec),
        "quarantineOverrides": {"force": False, "skip": True}, "drainOverrides": {"force": False, "skip": True},
        "processingStrategy": "STORE_ONLY",
    }


def node_verdict(rec: RankRecord, generated: str | None = None) -> dict[str, Any]:
    """A Health-Validation-style verdict for one node's record: category software, severity from the exit code."""
    act = action(rec.exit_code)
    check = {"check_id": CHECK, "category": "software", "severity": act.severity, "message": summary_line(rec),
             "recommended_action": f"slurm: {act.slurm}; kubernetes: {act.kubernetes}; retry: {act.retry}"}
    affected = [] if act.severity == "PASS" else [
        {"category": "software", "max_severity": act.severity, "check_ids": [CHECK], "entities": [_node(rec)]}]
    return {"node": _node(rec), "timestamp": generated or _now(), "overall_severity": act.severity,
            "affected_components": affected, "checks": [check], "exit_code": rec.exit_code}


def render(fmt: str, records: Iterable[RankRecord], generated: str | None = None) -> dict[str, Any]:
    """`fmt` (one of FORMATS) for every node's record: NVSentinel's HealthEvents message ({version, events}), or
    {"verdicts": [...]} of node verdicts. A missing rank has no node to blame: the fleet's own exit code says it."""
    recs = list(records)
    if fmt == "healthevent":
        return {"version": 1, "events": [health_event(r, generated) for r in recs]}
    return {"verdicts": [node_verdict(r, generated) for r in recs]}
