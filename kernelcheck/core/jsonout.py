"""The JSON kernelcheck prints and writes for other programs (--json, -o FILE): strict JSON only. A float that is
not finite (NaN, Infinity: Python's json writes them bare, and strict parsers such as jq, JavaScript's JSON.parse
or Go's encoding/json reject the whole document) is written as null; `allow_nan=False` makes any that slipped
past a ValueError, never output.

>>> dumps({"busy_us": float("nan"), "rows": [1.5, float("inf")]})
'{"busy_us": null, "rows": [1.5, null]}'
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float (nested in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(finite(value), allow_nan=False, **kwargs)
