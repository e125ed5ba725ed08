"""Which load the Hub answer is for, and what follows when it fails: one story per report (every function of a
job whose load fails is BROKEN and runs nothing), and what a CPU load then .to(DEVICE) resolves instead of a load
with device_map=DEVICE (transformers kernelizes for the device the model is on at the load)."""

from __future__ import annotations

from kernelcheck.core import decide
from kernelcheck.core.status import Finding, FunctionStatus, Mode, Severity
from kernelcheck.integrations.transformers_hub import TransformersHub, select_entry
from kernelcheck.integrations.transformers_load import PHASE_TRAIN, LoadName, load_phases
from kernelcheck.report.hub import HubRow

LOAD_FAILS_PROVIDER = decide.NOTHING_RUNS


def fails(functions: list[FunctionStatus], rows: list[HubRow], findings: list[Finding]) -> list[FunctionStatus]:
    """One story per report: where a repository the load resolves cannot be loaded (the rows' path load-fails:
    hub-not-listable, hub-build-fails), the job never starts, so every function it uses is BROKEN for that reason
    and runs nothing, whatever path it was bound to."""
    failing = [r for r in rows if r.path == "load-fails"]
    if not failing:
        return functions
    specs = ", ".join(dict.fromkeys(str(r.repo) for r in failing))
    at = "model.train() raises" if all(r.phase == PHASE_TRAIN for r in failing) else "the model load fails"
    cause = next((f for f in findings if f.severity == Severity.BROKEN and f.id.startswith("hub-")), None)
    rule = decide.RuleEvidence(
        cause.id if cause else "hub-not-listable", Severity.BROKEN, at,
        f"kernelize raises for {specs} before this function runs (see the hub section)",
        cause.fix if cause else None, tuple(fs.name for fs in functions), stops_job=True)
    return [decide.decide(fs, rules=[rule]) for fs in functions]


def device_finding(th: TransformersHub, names: dict[str, LoadName], rows: list[HubRow], dev: str,
                 mode: str, cap: int | None) -> list[Finding]:
    """transformers kernelizes for the device the model is on when it loads (device_map, else the CPU): the rows
    are for a GPU load (`from_pretrained(..., device_map=DEV)`). A job that loads on the CPU and then calls .to(DEV)
    is kernelized for cpu at the load, and again for DEV in TRAINING only when a train job calls model.train()
    (model.device is DEV by then). Say which load the verdict is for, and what the other resolves, where the two
    differ."""
    if dev == "cpu":
        return []
    gpu_repos = list(dict.fromkeys(r.repo for r in rows if r.repo))
    other: list[str] = []
    for name in names:
        entries = [e for e in th.mapping if e.name == name]
        for phase, phase_mode in load_phases(mode, th.eval_at_load):
            on = "cpu" if phase != PHASE_TRAIN else dev
            entry, _ = select_entry(entries, on, phase_mode, None if on == "cpu" else cap)
            if entry is not None and entry.repo.spec not in other:
                other.append(entry.repo.spec)
    if sorted(other) == sorted(gpu_repos):
        return []
    said = (f"resolves {', '.join(other)}" if other else
            "resolves no Hub repository: every layer keeps its torch forward")
    train = " (at the load: cpu; at model.train(): " + dev + ")" if mode == Mode.TRAIN and th.eval_at_load else ""
    return [Finding(
        "hub-load-device", Severity.INFO,
        f"the hub answer is for a job that loads with from_pretrained(..., device_map=\"{dev}\") (kernelized for "
        f"{dev}: {', '.join(gpu_repos) or 'no Hub repository'}). A job that loads on the CPU and then calls "
        f".to(\"{dev}\") {said}{train}.",
        None, "transformers hub_kernels.py kernelize (the device of device_map, else model.device)")]
