"""One rank's record as typed values: what summary.py keeps of a report, what gather.py moves between ranks and
table.py compares. `to_json` writes the record the fleet JSON carries under `ranks` (and a rank sends packed);
`from_json` reads a gathered one back, once, where it arrives (gather.py): the table reads fields, never keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelcheck.core.status import Status, Verdict
from kernelcheck.core.version import __version__

ENV_KEYS = ("python", "platform", "triton", "transformers", "kernels", "driver", "nvcc")


def text(value: Any) -> str | None:
    """A recorded word or version: None stays None, anything else its str (a hand-made report's 3.12 is "3.12")."""
    return None if value is None else value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class GpuBrief:
    name: str | None
    capability: str | None  # as the report wrote it ("9.0"); the table shows it as sm_90


@dataclass(frozen=True)
class TorchBrief:
    version: str | None
    cuda: str | None


@dataclass(frozen=True)
class RecordEnvironment:
    """The machine as a record carries it: versions, GPUs, each kernel package as `dist version` (None: absent),
    and the variables that change which kernel runs."""

    versions: Mapping[str, str | None] = field(default_factory=dict)  # ENV_KEYS -> version (None: absent)
    torch: TorchBrief | None = None
    gpus: tuple[GpuBrief, ...] = ()
    packages: Mapping[str, str | None] = field(default_factory=dict)
    dispatch: Mapping[str, str] = field(default_factory=dict)

    def version(self, key: str) -> str | None:
        return self.versions.get(key)

    def to_json(self) -> dict[str, Any]:
        return {**{k: self.versions.get(k) for k in ENV_KEYS},
                "torch": {"version": self.torch.version, "cuda": self.torch.cuda} if self.torch else None,
                "gpus": [{"name": g.name, "capability": g.capability} for g in self.gpus],
                "packages": dict(self.packages), "dispatch": dict(self.dispatch)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordEnvironment:
        t = data.get("torch")
        return cls({k: text(data.get(k)) for k in ENV_KEYS},
                   TorchBrief(text(t.get("version")), text(t.get("cuda"))) if isinstance(t, dict) and t else None,
                   tuple(GpuBrief(text(g.get("name")), text(g.get("capability"))) for g in _objects(data, "gpus")),
                   {str(k): text(v) for k, v in _mapping(data, "packages").items()},
                   {str(k): str(v) for k, v in _mapping(data, "dispatch").items()})


@dataclass(frozen=True)
class RecordFunction:
    """One function as a record carries it: its status (a Status) and implementation, whether it is used, and
    its reason cut to a line."""

    name: str
    package: str | None
    status: Status
    implementation: str | None
    used: bool = True
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "package": self.package, "status": self.status,
                "implementation": self.implementation, "used": self.used, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordFunction:
        return cls(str(data["name"]), text(data.get("package")), Status(data["status"]),
                   text(data.get("implementation")), data.get("used", True), text(data.get("reason")))


@dataclass(frozen=True)
class RecordFinding:
    """A finding as a record carries it: its id (what the fleet reads), severity and message cut to a line."""

    id: str | None
    severity: str | None
    message: str | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "message": self.message}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordFinding:
        return cls(text(data.get("id")), text(data.get("severity")), text(data.get("message")))


@dataclass(frozen=True)
class RecordModel:
    id: str | None  # the Hub id, or what was typed
    model_type: str | None


@dataclass(frozen=True)
class RankRecord:
    """What one rank (or one compared report file) contributes. A check that stopped before its report is a
    record with an `error` and no verdict; `label` names a compared file (its stem), `rank`/`host` a gathered
    rank."""

    exit_code: int
    verdict: Verdict | None = None
    command: str | None = None
    schema: str | None = None
    kernelcheck: str = __version__
    rank: int | None = None
    host: str | None = None
    label: str | None = None
    error: str | None = None
    model: RecordModel | None = None
    mode: str | None = None
    environment: RecordEnvironment = field(default_factory=RecordEnvironment)
    functions: tuple[RecordFunction, ...] = ()
    findings: tuple[RecordFinding, ...] = ()

    @property
    def stopped(self) -> bool:
        """The check stopped before its report: the record holds its error, no verdict."""
        return self.error is not None

    def to_json(self) -> dict[str, Any]:
        if self.stopped:
            out: dict[str, Any] = {"schema": self.schema, "command": self.command, "verdict": None,
                                   "exit_code": self.exit_code, "error": self.error, "rank": self.rank,
                                   "host": self.host, "kernelcheck": self.kernelcheck}
        else:
            out = {"schema": self.schema, "kernelcheck": self.kernelcheck, "command": self.command,
                   "verdict": self.verdict, "exit_code": self.exit_code, "rank": self.rank, "host": self.host,
                   "model": ({"id": self.model.id, "model_type": self.model.model_type} if self.model else None),
                   "mode": self.mode, "environment": self.environment.to_json(),
                   "functions": [f.to_json() for f in self.functions],
                   "findings": [f.to_json() for f in self.findings]}
        if self.label is not None:
            out["label"] = self.label
        return out

    @classmethod
    def from_json(cls, data: Any) -> RankRecord:
        """A record as a rank sent it, typed; ValueError when it is not one this kernelcheck reads (another
        version's, or not a record)."""
        try:
            return cls._read(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a record: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _read(cls, data: Mapping[str, Any]) -> RankRecord:
        code, rank = data["exit_code"], data.get("rank")
        if isinstance(code, bool) or not isinstance(code, int) or not (rank is None or isinstance(rank, int)):
            raise ValueError(f"exit_code {code!r}, rank {rank!r}")
        head: dict[str, Any] = {
            "exit_code": code, "command": text(data.get("command")), "schema": text(data.get("schema")),
            "kernelcheck": text(data.get("kernelcheck")) or __version__, "rank": rank,
            "host": text(data.get("host")), "label": text(data.get("label"))}
        if data.get("error") is not None:
            return cls(**head, error=str(data["error"]))
        model = data.get("model")
        return cls(**head, verdict=Verdict(data["verdict"]) if data.get("verdict") is not None else None,
                   model=RecordModel(text(model.get("id")), text(model.get("model_type"))) if model else None,
                   mode=text(data.get("mode")), environment=RecordEnvironment.from_json(data.get("environment") or {}),
                   functions=tuple(RecordFunction.from_json(f) for f in _objects(data, "functions")),
                   findings=tuple(RecordFinding.from_json(f) for f in _objects(data, "findings")))


def _objects(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = data.get(key) or []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ValueError(f"{key} is not a list of objects")
    return items


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    got = data.get(key) or {}
    if not isinstance(got, dict):
        raise ValueError(f"{key} is not an object")
    return got
