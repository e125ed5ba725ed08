"""`kernelcheck models` (and `kernelcheck.models()`): the models the matrix knows, as the installed transformers
builds them: the aliases, each model_type's family and the fast functions that family needs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kernelcheck.commands.context import Context
from kernelcheck.core.outcome import Outcome
from kernelcheck.core.status import Verdict


@dataclass(frozen=True)
class Request:
    """models takes no options (its output options are the CLI's)."""


@dataclass(frozen=True)
class KnownAlias:
    alias: str
    id: str
    model_type: str


@dataclass(frozen=True)
class KnownType:
    model_type: str
    family: str
    functions: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    name: str
    title: str
    functions: tuple[str, ...]


@dataclass(frozen=True)
class Models:
    """The listing: `model_types` as the installed transformers (`transformers`, None without one) builds them."""

    aliases: tuple[KnownAlias, ...]
    model_types: tuple[KnownType, ...]
    families: tuple[Family, ...]
    transformers: str | None

    def to_json(self) -> dict[str, Any]:
        from kernelcheck import schemas

        return {"schema": schemas.schema_id("models"), "command": "models", "verdict": Verdict.READY, "exit_code": 0,
                **dataclasses.asdict(self)}


def run(req: Request, ctx: Context) -> Outcome[Models]:
    from kernelcheck.integrations.transformers_models import installed_version

    m, version = ctx.matrix, installed_version()
    aliases = tuple(KnownAlias(a.name, a.id, a.model_type or m.shipped_config(a.config)["model_type"])
                    for a in m.aliases.values())
    types = tuple(KnownType(t.name, t.family, t.functions) for t in (t.at(version) for t in m.model_types.values()))
    families = tuple(Family(name, d["title"], tuple(d["functions"])) for name, d in m.families.items())
    return Outcome(Models(aliases, types, families, version), Verdict.READY)
