"""The Hub section's typed values (hub/check.py and `kernelcheck hub --repo` fill them): what transformers says
(HubTransformers), its mapping entries for the model's names (HubMapEntry), one row per Hub name of the model
(HubRow), the repositories resolved (kernels_hub.Resolution), and the items the section's lines are made of. Their
sentences are written in report/hub_text.py."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kernelcheck.integrations.kernels_hub import Resolution
from kernelcheck.integrations.transformers_hub import MappingEntry, TransformersHub


@dataclass(frozen=True)
class HubTransformers:
    """What the installed transformers says about Hub kernels (TransformersHub without its mapping): its version,
    the `kernels` window (">=a,<b", None when unread), USE_HUB_KERNELS, the use_kernels default and where each was
    read; `unread`: what the static reader did not understand."""

    transformers: str | None
    kernels: str | None
    window: str | None
    window_source: str
    window_met: bool
    use_hub_kernels: str
    use_hub_kernels_set: bool
    hub_enabled_by_env: bool
    use_kernels_default: bool | None
    use_kernels_source: str
    refuses_when_unusable: bool
    mapping_source: str
    error: str | None = None
    unread: tuple[str, ...] = ()

    @classmethod
    def of(cls, th: TransformersHub) -> HubTransformers:
        return cls(th.transformers, th.kernels, th.window_text if th.window else None, th.window_source,
                   th.window_met, th.use_hub_kernels, th.use_hub_kernels_set, th.hub_enabled_by_env,
                   th.use_kernels_default, th.use_kernels_source, th.refuses_when_unusable, th.mapping_source,
                   th.error, th.unread)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["unread"] = list(self.unread)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HubTransformers:
        return cls(**{**data, "unread": tuple(data["unread"])})


@dataclass(frozen=True)
class HubMapEntry:
    """One entry of transformers' Hub mapping for a name of the model: the repository spec (org/name@vN) and the
    layer (or function) kernels loads from it, for a device, modes and capability range (min, max: 90 = sm_90)."""

    name: str
    device: str
    modes: tuple[str, ...]
    repo: str
    layer: str
    capability: tuple[int, int] | None = None

    @classmethod
    def of(cls, e: MappingEntry) -> HubMapEntry:
        return cls(e.name, e.device, tuple(e.modes), e.repo.spec, e.repo.layer_name, e.capability)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "device": self.device, "modes": list(self.modes), "repo": self.repo,
                "layer": self.layer, "capability": list(self.capability) if self.capability is not None else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HubMapEntry:
        cap = data["capability"]
        return cls(data["name"], data["device"], tuple(data["modes"]), data["repo"], data["layer"],
                   (cap[0], cap[1]) if cap is not None else None)


@dataclass
class HubRow:
    """One Hub name of the model (a layer or a function): the mapping entry (repo, layer) and the build kernels
    picks (`variant`, or why none: nearest, error, problem, blocked), or the `note` why nothing is mapped; `path` is
    the code the job runs (hub, package, torch, load-fails) and `implementation` the function's bound one."""

    name: str
    kind: str  # layer | function
    mapped: bool
    note: str | None = None
    repo: str | None = None  # the repository spec, when an entry was selected
    layer: str | None = None
    source: str | None = None
    variant: str | None = None
    nearest: str | None = None
    would_match: str | None = None
    error: str | None = None
    problem: str | None = None
    blocked: str | None = None
    path: str | None = None
    implementation: str | None = None
    where: str | None = None  # where the load meets it (modeling_gpt2.GPT2MLP: ACT2FN[...] -> activations.X)
    phase: str | None = None  # a train job's rows: load (kernelized for INFERENCE) or train (at model.train())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "mapped": self.mapped}
        if self.where is not None:
            out["where"] = self.where
        if self.phase is not None:
            out["phase"] = self.phase
        if self.note is not None:
            out["note"] = self.note
        if self.repo is not None:
            out.update({k: getattr(self, k) for k in _RESOLVED})
        if self.path is not None:
            out["path"] = self.path
        if self.implementation is not None:
            out["implementation"] = self.implementation
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HubRow:
        return cls(**data)


_RESOLVED = ("repo", "layer", "source", "variant", "nearest", "would_match", "error", "problem", "blocked")


@dataclass(frozen=True)
class WindowLine:
    """transformers' window for `kernels` and whether the installed one is inside it."""

    transformers: str | None
    window: str
    window_source: str
    kernels: str | None
    met: bool
    refused: bool  # from_pretrained refuses to load (ValueError) rather than treating kernels as absent


@dataclass(frozen=True)
class SwitchLine:
    """USE_HUB_KERNELS (set, or transformers' default) and from_pretrained's use_kernels default."""

    use_hub_kernels: str
    is_set: bool
    enabled: bool
    use_kernels_default: bool | None
    use_kernels_source: str


@dataclass(frozen=True)
class UseLine:
    """Whether this job loads Hub kernels, and why; `said_above`: the start of `why` the switch line above already
    says (from_pretrained's use_kernels default and where it is read), written once."""

    used: bool
    why: str
    said_above: str = ""


@dataclass(frozen=True)
class ListingLine:
    """Where build variants are listed from. `origin`: the verdict device's (core/device.py ORIGINS); `listing`: offline
    | online | cache (HF cache only, `used` says whether for --source cache or because Hub kernels are off)."""

    device: str
    origin: str
    mode: str
    listing: str
    used: bool


@dataclass(frozen=True)
class TargetLine:
    """--torch/--cuda/--arch: kernels' resolver runs with these values; cuda "" is a CPU build, None as installed."""

    torch: str | None
    cuda: str | None
    sm: str | None


@dataclass(frozen=True)
class KernelsAbsentLine:
    """No `kernels` package: nothing resolved; `default_refuses`: use_kernels=True by default raises at load."""

    default_refuses: bool


@dataclass(frozen=True)
class LayoutUnknownLine:
    """No kernels adapter fits the installed release (integrations/kernels_api's reason)."""

    reason: str


@dataclass(frozen=True)
class RowLine:
    """One row of the section, as the job meets it (`used`: the path it runs is said too)."""

    row: HubRow
    used: bool


@dataclass(frozen=True)
class ResolutionLines:
    """A repository the model maps to: every variant kernels listed, the chosen one, and notes."""

    spec: str
    resolution: Resolution


@dataclass(frozen=True)
class RepoCheckLines:
    """`kernelcheck hub --repo`: the repository resolved directly."""

    resolution: Resolution


@dataclass(frozen=True)
class PrintedLine:
    """A line as a report's JSON printed it (a report read back: Report.from_json)."""

    text: str


HubLine = (WindowLine | SwitchLine | UseLine | ListingLine | TargetLine | KernelsAbsentLine | LayoutUnknownLine
           | RowLine | ResolutionLines | RepoCheckLines | PrintedLine)
