"""The typed report every command fills: findings, function statuses, the verdict, its sections, and its JSON
(report/text.py writes the text for people from the same values)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kernelcheck import schemas
from kernelcheck.core import decide
from kernelcheck.core.codec import Fields
from kernelcheck.core.plan_step import Step
from kernelcheck.core.status import (
    EXIT_CODE,
    Finding,
    FunctionStatus,
    Verdict,
)
from kernelcheck.report.trace import TraceSection

if TYPE_CHECKING:  # the sections' own modules load where a section is built or read back (a trace or padding
    # report, the most common run on a big file, needs none of them: a tenth of a second of imports)
    from kernelcheck.core.device import Device
    from kernelcheck.integrations.kernels_hub import Resolution
    from kernelcheck.report.budget import BudgetSection
    from kernelcheck.report.compiled import CompiledSection
    from kernelcheck.report.hub import HubLine, HubMapEntry, HubRow, HubTransformers
    from kernelcheck.report.live import LiveLine
    from kernelcheck.report.live_details import LiveDetails
    from kernelcheck.report.sections import BackendsSection, EnvironmentView, ModelRef, PackingSection
    from kernelcheck.report.step import StepSection


@dataclass(frozen=True)
class Needs(Fields):
    """What the model needs (doctor): its fast functions, their packages, the attention implementation."""

    functions: list[str]
    packages: list[str]
    attn_implementation: str


@dataclass(frozen=True)
class Bindings(Fields):
    """How doctor read transformers' bindings: the regime and the modeling module."""

    regime: str
    module: str


@dataclass
class HubSection:
    """The Kernel Hub section (hub/check.py); `kernelcheck hub --repo` adds to `repos` and `items`. `items` are
    what its lines say (report/hub.py), written as sentences by report/hub_text.py: the JSON `lines`."""

    items: list[HubLine]
    used: bool
    why: str | None
    device: str
    mode: str
    offline: bool
    transformers: HubTransformers
    mapping: list[HubMapEntry]
    names: list[HubRow]
    repos: list[Resolution]

    @property
    def lines(self) -> list[str]:
        from kernelcheck.report import hub_text

        return hub_text.lines(self.items)

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "used": self.used, "why": self.why, "device": self.device, "mode": self.mode,
                "offline": self.offline, "transformers": self.transformers.to_json(),
                "mapping": [e.to_json() for e in self.mapping], "names": [r.to_json() for r in self.names],
                "repos": [r.to_json() for r in self.repos]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HubSection:
        """A section read back: its lines as they were printed, its values typed."""
        from kernelcheck.integrations.kernels_hub import Resolution
        from kernelcheck.report.hub import HubMapEntry, HubRow, HubTransformers, PrintedLine

        return cls([PrintedLine(t) for t in data["lines"]], data["used"], data["why"], data["device"], data["mode"],
                   data["offline"], HubTransformers.from_json(data["transformers"]),
                   [HubMapEntry.from_json(e) for e in data["mapping"]], [HubRow.from_json(r) for r in data["names"]],
                   [Resolution.from_json(r) for r in data["repos"]])


@dataclass
class LiveSection:
    """What running the real layers showed (verify): whether it ran, the run's details, and `items`: what its
    lines say (report/live.py), written as sentences by report/live_text.py: the JSON `lines`."""

    ran: bool
    items: list[LiveLine]
    step: bool = False  # verify --step: the step section holds the details
    details: LiveDetails | None = None  # a full run: device, dtype, shape, tokens, model, ..., timing
    captured_output: str | None = None

    @property
    def lines(self) -> list[str]:
        from kernelcheck.report import live_text

        return live_text.lines(self.items)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ran": self.ran}
        if self.step:
            out["step"] = True
        if self.details is not None:
            out.update(self.details.to_json())
        out["lines"] = self.lines
        if self.details is not None:
            out["captured_output"] = self.captured_output
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveSection:
        """A section read back: its lines as they were printed, a full run's details typed (LiveDetails)."""
        from kernelcheck.report.hub import PrintedLine
        from kernelcheck.report.live_details import LiveDetails

        full = "captured_output" in data  # a full run: its details, then the captured output
        return cls(data["ran"], [PrintedLine(t) for t in data["lines"]], bool(data.get("step")),
                   LiveDetails.from_json(data) if full else None, data.get("captured_output"))


@dataclass(frozen=True)
class Before:
    """install: the doctor's verdict and statuses before anything was installed."""

    verdict: str
    functions: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "functions": dict(self.functions)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Before:
        return cls(data["verdict"], dict(data["functions"]))


@dataclass(frozen=True)
class ImportProof(Fields):
    """doctor: where the import answers came from (doctor/imports.py, doctor/proofcache.py): `source` proven |
    cache; `cache` off | hit | baked (a hit in KERNELCHECK_PROOF_DIR: made when the image was built) | stored | not
    stored; the proof file and when it was made."""

    source: str
    cache: str
    file: str | None = None
    proven_at: str | None = None


@dataclass(frozen=True)
class Prediction:
    """install: a plan that was not carried out (dry run, blocked) or a Hub pre-fetch: its predicted verdict.
    `lock` is the kernels lock a Hub pre-fetch wrote (None when it wrote none); `has_lock` says the key is shown."""

    predicted: str
    executed: bool
    lock: str | None = None
    has_lock: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"predicted": self.predicted, "executed": self.executed}
        if self.has_lock:
            out["lock"] = self.lock
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Prediction:
        """From the report's own keys (the section is merged into the report's JSON)."""
        return cls(data["predicted"], data["executed"], data.get("lock"), has_lock="lock" in data)


@dataclass(frozen=True)
class ErrorReport:
    """What a command prints with --json when it stops on an error (cli/common.py): no statuses, the message."""

    command: str
    verdict: str | None
    exit_code: int
    error: str

    def to_json(self) -> dict[str, Any]:
        return {"schema": schemas.ERROR, "command": self.command, "verdict": self.verdict,
                "exit_code": self.exit_code, "error": self.error}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ErrorReport:
        return cls(data["command"], data.get("verdict"), data["exit_code"], data["error"])


@dataclass(frozen=True)
class Installed:
    """install: what was installed, the manifest, how long it took, and the doctor run after it (its report, or
    the error it stopped on; None when it printed no JSON)."""

    installed: list[dict[str, Any]]
    manifest: Any
    install_seconds: float
    doctor_after: Report | ErrorReport | None = None
    has_doctor_after: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {"installed": self.installed, "manifest": self.manifest, "install_seconds": self.install_seconds}
        if self.has_doctor_after:
            out["doctor_after"] = self.doctor_after.to_json() if self.doctor_after is not None else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Installed:
        """From the report's own keys (the section is merged into the report's JSON)."""
        after = data.get("doctor_after")
        return cls(data["installed"], data["manifest"], data["install_seconds"],
                   read_report(after) if after is not None else None, has_doctor_after="doctor_after" in data)


# Report.sections_json's order: each typed section's JSON key after `findings`; "json": key -> section.to_json(),
# "raw": key -> the value itself, "merge": the section's own keys merged in at that place, "steps": key -> each
# step's to_json().
_SECTIONS: tuple[tuple[str, str], ...] = (
    ("device", "json"),
    ("needs", "json"), ("bindings", "json"), ("before", "json"), ("plan", "steps"), ("prediction", "merge"),
    ("installed", "merge"), ("hub", "json"), ("step", "json"), ("live", "json"), ("packing", "json"),
    ("import_proof", "json"), ("trace", "merge"), ("backends", "json"), ("compiled", "json"), ("budget", "json"),
)


@dataclass
class Report:
    command: str
    environment: EnvironmentView | None  # None: not probed (trace); the JSON shows {}
    model: ModelRef | None
    mode: str | None
    functions: list[FunctionStatus] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # the typed sections, each written by one module; JSON shows the set ones in this order
    device: Device | None = None  # the device the verdict is for (core/device.py): doctor, verify, hub
    needs: Needs | None = None  # doctor
    bindings: Bindings | None = None  # doctor
    before: Before | None = None  # install
    plan: list[Step] | None = None  # install, hub --prefetch (core/plan_step.py)
    prediction: Prediction | None = None  # install (dry run, blocked, --source hub)
    installed: Installed | None = None  # install
    hub: HubSection | None = None  # hub/check.py
    step: StepSection | None = None  # verify --step (verify/step.py)
    live: LiveSection | None = None  # verify, doctor --live
    packing: PackingSection | None = None  # doctor (packing/findings.py)
    import_proof: ImportProof | None = None  # doctor (doctor/imports.py)
    trace: TraceSection | None = None  # trace
    backends: BackendsSection | None = None  # doctor: the backend of each fla op (doctor/backends.py)
    compiled: CompiledSection | None = None  # verify --compile (verify/compiled.py)
    budget: BudgetSection | None = None  # trace --budget, verify --step --budget (budget/)

    @property
    def verdict(self) -> Verdict:
        return decide.verdict(self.functions, self.findings)

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[self.verdict]

    def sections_json(self) -> dict[str, Any]:
        """The typed sections as the JSON keys after `findings`."""
        out: dict[str, Any] = {}
        for name, how in _SECTIONS:
            sec = getattr(self, name)
            if sec is None:
                continue
            if how == "merge":
                out.update(sec.to_json())
            elif how == "json":
                out[name] = sec.to_json()
            elif how == "steps":
                out[name] = [s.to_json() for s in sec]
            else:
                out[name] = sec
        return out

    def to_json(self) -> dict[str, Any]:
        out = {
            "schema": schemas.schema_id(self.command),  # one id per report kind
            "command": self.command,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "environment": self.environment.to_json() if self.environment is not None else {},
            "model": self.model.to_json() if self.model is not None else None,
            "mode": self.mode,
            "functions": [_drop_none(asdict(f)) for f in self.functions],
            "findings": [_finding_json(f) for f in self.findings],
        }
        out.update(self.sections_json())
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        """The report a command printed with --json, typed again (install reads the doctor it ran after the
        install): to_json(from_json(x)) == x for a doctor's report; verdict and exit code are decided again."""
        from kernelcheck.report.sections import EnvironmentView, ModelRef

        env, model = data["environment"], data["model"]
        rep = cls(data["command"], EnvironmentView.from_json(env) if env else None,
                  ModelRef.from_json(model) if model is not None else None, data["mode"],
                  [FunctionStatus.from_json(f) for f in data.get("functions", [])],
                  [Finding.from_json(f) for f in data.get("findings", [])])
        for name, how in _SECTIONS:
            if how == "merge":
                if _MERGED_KEY[name] in data:
                    setattr(rep, name, _section_type(name).from_json(data))
            elif name in data:
                setattr(rep, name, _section_type(name).from_json(data[name]) if how == "json"
                        else [Step.from_json(s) for s in data[name]] if how == "steps" else data[name])
        return rep


def _section_type(name: str) -> Any:
    """The typed section's class; a merged section is read back when its first key is in the report's JSON."""
    from kernelcheck.core.device import Device
    from kernelcheck.report.budget import BudgetSection
    from kernelcheck.report.compiled import CompiledSection
    from kernelcheck.report.sections import BackendsSection, PackingSection
    from kernelcheck.report.step import StepSection

    return {
        "device": Device,
        "needs": Needs, "bindings": Bindings, "before": Before, "prediction": Prediction, "installed": Installed,
        "hub": HubSection, "step": StepSection, "live": LiveSection, "import_proof": ImportProof,
        "trace": TraceSection, "packing": PackingSection, "backends": BackendsSection, "compiled": CompiledSection,
        "budget": BudgetSection,
    }[name]


_MERGED_KEY = {"prediction": "predicted", "installed": "installed", "trace": "trace"}


def read_report(data: dict[str, Any]) -> Report | ErrorReport:
    """A report's JSON, typed: the error a command stopped on (no functions, an `error`), or the report."""
    if not data.get("functions") and "error" in data:
        return ErrorReport.from_json(data)
    return Report.from_json(data)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    keep = {"reason", "fix", "implementation", "status", "name", "package"}
    return {k: v for k, v in d.items() if (v is not None or k in keep) and k != "cause"}  # cause: decisions only


def _finding_json(f: Finding) -> dict[str, Any]:
    d = asdict(f)
    d["functions"] = list(f.functions)
    if f.decorators:
        d["decorators"] = list(f.decorators)
    else:
        del d["decorators"]  # printed only by the findings about decorators
    return d


def render_json(report: Report) -> str:
    from kernelcheck.core import jsonout

    return jsonout.dumps(report.to_json(), indent=2, default=str)
