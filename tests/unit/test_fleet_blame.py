"""Blame a cluster can act on (kernelcheck/fleet/blame.py): each exit code as an NVSentinel HealthEvent and a
Health-Validation-style node verdict, checked field by field against NVSentinel's HealthEvent message, and the
table in docs/fleet.md checked row by row against what the code emits. The words of the table are the code's."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core.status import EXIT_BROKEN, EXIT_FALLBACK, EXIT_INTERNAL, EXIT_READY, EXIT_USAGE, Verdict
from kernelcheck.fleet import blame, summary
from kernelcheck.fleet.record import RankRecord

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "tests" / "data" / "reports"
# NVSentinel data-models/protobufs/health_event.proto (github.com/NVIDIA/NVSentinel): message HealthEvent's fields
# in protobuf's JSON names, and the enum words of RecommendedAction and ProcessingStrategy
HEALTH_EVENT_FIELDS = {"version", "agent", "componentClass", "checkName", "isFatal", "isHealthy", "message",
                       "recommendedAction", "errorCode", "entitiesImpacted", "metadata", "generatedTimestamp",
                       "nodeName", "quarantineOverrides", "drainOverrides", "processingStrategy"}
RECOMMENDED_ACTIONS = {"NONE", "COMPONENT_RESET", "CONTACT_SUPPORT", "RUN_FIELDDIAG", "RESTART_VM", "RESTART_BM",
                       "REPLACE_VM", "RUN_DCGMEUD", "RESTART_APP", "UNKNOWN"}
PROCESSING = {"UNSPECIFIED", "EXECUTE_REMEDIATION", "STORE_ONLY"}
CODES = (EXIT_READY, EXIT_FALLBACK, EXIT_BROKEN, EXIT_USAGE, EXIT_INTERNAL)


def _record(code: int) -> RankRecord:
    """A real doctor report's record (fallback) with the verdict of `code`; the error codes as a stopped check."""
    rec = summary.summarise(json.loads((REPORTS / "doctor_train.json").read_text()), host="node07")
    if code in (EXIT_USAGE, EXIT_INTERNAL):
        return RankRecord(exit_code=code, command="doctor", host="node07", error="unknown model 'qwen9'")
    verdict = {EXIT_READY: Verdict.READY, EXIT_FALLBACK: Verdict.FALLBACK, EXIT_BROKEN: Verdict.BROKEN}[code]
    return replace(rec, exit_code=code, verdict=verdict)


@pytest.mark.parametrize("code", CODES)
def test_a_software_verdict_never_asks_for_a_node_action(code: int) -> None:
    event = blame.health_event(_record(code), generated="2026-12-07T00:00:00Z")
    assert set(event) <= HEALTH_EVENT_FIELDS
    assert event["recommendedAction"] in RECOMMENDED_ACTIONS and event["processingStrategy"] in PROCESSING
    assert event["isFatal"] is False and event["recommendedAction"] == "NONE"
    assert event["processingStrategy"] == "STORE_ONLY"
    assert event["quarantineOverrides"]["skip"] is True and event["drainOverrides"]["skip"] is True
    assert event["isHealthy"] is (code == EXIT_READY)
    assert event["componentClass"] == "Software" and event["nodeName"] == "node07"
    assert event["errorCode"][0] == f"kernelcheck-exit-{code}"
    assert event["metadata"]["exit_code"] == str(code)
    assert all(isinstance(v, str) for v in event["metadata"].values())  # proto map<string, string>


def test_the_event_names_the_packages_at_fault_and_the_findings() -> None:
    event = blame.health_event(_record(EXIT_FALLBACK))
    assert [e["entityValue"] for e in event["entitiesImpacted"]] == ["fla-core", "causal-conv1d"]
    assert {"torch-cpu-build", "kernels-window"} <= set(event["errorCode"])
    assert event["message"].startswith("kernelcheck fallback (exit 3) for Qwen/Qwen3.8-27B: chunk_gated_delta_rule")
    assert blame.health_event(_record(EXIT_READY))["entitiesImpacted"] == []


@pytest.mark.parametrize("code,severity", [(EXIT_READY, "PASS"), (EXIT_FALLBACK, "WARNING"), (EXIT_BROKEN, "CRITICAL"),
                                           (EXIT_USAGE, "UNKNOWN"), (EXIT_INTERNAL, "UNKNOWN")])
def test_the_node_verdict_is_software_with_the_severity_of_the_exit_code(code: int, severity: str) -> None:
    v = blame.node_verdict(_record(code))
    assert v["overall_severity"] == severity and v["exit_code"] == code and v["node"] == "node07"
    assert [c["category"] for c in v["checks"]] == ["software"]
    if code == EXIT_READY:
        assert v["affected_components"] == []
    else:
        (comp,) = v["affected_components"]
        assert comp == {"category": "software", "max_severity": severity, "check_ids": ["kernelcheck-gate"],
                        "entities": ["node07"]}


def _doc_rows() -> dict[int, list[str]]:
    text = (ROOT / "docs" / "fleet.md").read_text()
    section = text.split("## Blame a cluster can act on", 1)[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if re.match(r"\| \d ", line)]
    return {int(r[0].split()[0]): r for r in rows}


def test_the_docs_table_is_what_the_code_does_for_each_exit_code() -> None:
    rows = _doc_rows()
    assert sorted(rows) == sorted(CODES)
    for code, (head, event_cell, severity, slurm, kubernetes, retry) in rows.items():
        act = blame.action(code)
        assert head == f"{code} {act.verdict}"
        event = blame.health_event(_record(code))
        said = dict(re.findall(r"`(\w+): (\w+)`", event_cell))
        assert said == {"isHealthy": str(event["isHealthy"]).lower(), "isFatal": str(event["isFatal"]).lower(),
                        "recommendedAction": event["recommendedAction"]}
        assert severity == f"`{blame.node_verdict(_record(code))['overall_severity']}`"
        assert (slurm, kubernetes, retry) == (act.slurm, act.kubernetes, act.retry)
    # hold the job, keep the node: no row drains or cordons
    assert all("keep the node" in rows[c][3] for c in CODES if c != EXIT_READY)
    assert all("no cordon, no drain" in rows[c][4] for c in CODES if c != EXIT_READY)


@pytest.mark.parametrize("fmt,key", [("healthevent", "events"), ("nodeverdict", "verdicts")])
def test_compare_prints_the_format_and_keeps_the_fleets_exit_code(fmt: str, key: str) -> None:
    res = CliRunner().invoke(main, ["compare", str(REPORTS / "doctor_train.json"), str(REPORTS / "doctor_infer.json"),
                                    "--format", fmt])
    assert res.exit_code == EXIT_FALLBACK, res.output
    data: dict[str, Any] = json.loads(res.output)
    nodes = [e.get("nodeName") or e.get("node") for e in data[key]]
    assert nodes == ["doctor_train", "doctor_infer"]
    if fmt == "healthevent":
        assert data["version"] == 1 and all(e["isFatal"] is False for e in data["events"])
