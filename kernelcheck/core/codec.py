"""The one small JSON codec of the records whose JSON is their fields, in order, as they are (str, numbers, None,
lists of those): `Fields` gives such a frozen dataclass its `to_json` and `from_json`. A record whose JSON leaves
keys out, renames them or nests other records writes its own pair.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Gaps(Fields):
...     count: int
...     longest_us: float
>>> Gaps(2, 5.0).to_json(), Gaps.from_json({"count": 2, "longest_us": 5.0})
({'count': 2, 'longest_us': 5.0}, Gaps(count=2, longest_us=5.0))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Self, cast


class Fields:
    """The JSON of a dataclass of plain values: its fields in declaration order, read back by name."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(cast(Any, self))}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        made: Self = cast(Any, cls)(**data)
        return made
