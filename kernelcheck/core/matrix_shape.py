"""The shape of each matrix/*.toml file: the keys kernelcheck's readers take and the types they expect.

A KERNELCHECK_MATRIX_DIR folder is a user's file: a copy of matrix/ that may be edited, truncated or half copied.
`check(name, data, source)` compares one file's parsed TOML with its shape here and raises BadInput naming the
file and the first key at fault, so a bad copy is exit 2 with the key to fix, never a KeyError deep in a command.
The deeper rules of packages.toml, functions.toml and breakages.toml (cross references, version specifiers) stay
with their typed readers in core/matrix.py; this module checks what is read as plain tables.

A shape is "str", "nstr" (a string or null), "cap" (a compute capability, "9.0"), "int" (> 0), "num" (a finite
number > 0), "bool", "any", ("list", item shape), or a dict of key -> shape: a key ending in "?" may be absent, "*"
is the shape of every other key (None: no other key allowed; absent: other keys are free).
"""

from __future__ import annotations

import functools
import json
import math
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kernelcheck.core.errors import BadInput

Shape = Any
_POSITIVE = {"tiny": "int", "full": "int"}
_MEASURED = {"model_type": "nstr", "bound_tokens_per_s": "num", "reference_tokens_per_s": "num",
             "date?": "nstr", "gpu?": "nstr", "torch?": "nstr", "transformers?": "nstr", "triton?": "nstr"}

SHAPES: dict[str, Shape] = {
    "models.toml": {
        "families": {"*": {"functions": ("list", "str")}},
        "model_types": {"*": {"family": "str", "module": "str", "layer?": "str", "text_model_type?": "str",
                              "since?": "str", "earlier?": ("list", {"before": "str", "family": "str"}), "*": None}},
        "aliases": {"*": {"id": "str", "config?": "str", "model_type?": "str", "reference?": "str", "*": None}},
        "attention": {"*": {"package": "str"}},
    },
    "verify.toml": {
        "tiny": {"fields": {}, "model_types?": {"*": {}}, "token_id_fields?": ("list", "str")},
        "full": {},
        "tokens": _POSITIVE,
        "tolerance": {"bfloat16": "num", "float16": "num", "float32": "num", "*": "num"},
        "benchmark": {"warmup": "int", "min_iters": "int", "max_iters": "int", "min_seconds": "num",
                      "control_repeats": "int", "control_slowdown": "num"},
        "step": {"warmup": "int", "timed": "int", "profiled": "int", "timeout_s": "num", "tokens": _POSITIVE,
                 "control_repeats": "int", "control_slowdown": "num"},
    },
    "verified.toml": {"verified?": ("list", {}), "measured?": ("list", _MEASURED)},
    "packing.toml": {
        "guard": {"file": "str", "text": "str"},
        "modes": {"*": {"passes": ("list", "str"), "summary": "str", "collator?": {"*": "bool"}}},
        "cache?": {"file": "str", "texts": ("list", "str")},
        "functions": {"*": {"needs": "str", "package": "str"}},
    },
    "gpus.toml": {"capabilities": {"known": ("list", "cap")},
                  "peak?": ("list", {"gpu": "str", "name": "str", "bf16_tflops": "num", "hbm_tb_s": "num",
                                     "reference": "str", "*": None})},
    "op_classes.toml": {
        "class": ("list", {"id": "str", "title": "str", "floor": "str", "*": None}),
        "rule": ("list", {"class": "str", "kernel?": "str", "range?": "str", "reference": "str", "*": None}),
        "cause": ("list", {"id": "str", "class": "str", "kernel?": "str", "range?": "str", "unless?": "str",
                           "min_ms": "num", "cause": "str", "fix": "str", "reference": "str", "*": None}),
    },
    "breakages.toml": {"breakage?": ("list", {}), "import_error?": ("list", {}), "runtime_error?": ("list", {})},
    "torch.toml": {"triton?": {"*": {"version": "str"}}},
    "data.toml": {"updated?": "str"},
    "fla_dispatch.toml": {"layout?": ("list", {})},
    "transformers.toml": {"kernels_window?": ("list", {})},
    "jit_caches.toml": {
        "jit": {"*": {"title": "str", "variables": ("list", ("list", "str")), "key": ("list", "str"),
                      "reference": "str", "unstable?": "str", "compile_only?": "bool", "*": None}},
        "part": {"*": "str"}, "node": {"*": "str"},
    },
    "signatures.toml": {"package": {"*": {"fast_kernels": ("list", "str")}}, "signature?": ("list", {}),
                        "launch_bound": {}},
}
OPTIONAL = ("verified.toml", "data.toml")  # read only where present
MEASURED = _MEASURED  # one measured step (verified.toml [[measured]], a KERNELCHECK_MEASUREMENTS line)

_CAPABILITY = re.compile(r"[0-9]{1,2}\.[0-9]")  # a compute capability as NVIDIA writes it: 9.0, 12.1
_WORDS = {"str": "a string", "nstr": "a string or null", "cap": "a compute capability such as \"9.0\"",
          "int": "a whole number above 0",
          "num": "a finite number above 0", "bool": "true or false", "list": "a list", "table": "a table"}


def _scalar(v: Any, shape: str) -> bool:
    if shape == "any":
        return True
    if shape == "str":
        return isinstance(v, str)
    if shape == "nstr":
        return v is None or isinstance(v, str)
    if shape == "cap":
        return isinstance(v, str) and _CAPABILITY.fullmatch(v) is not None
    if shape == "bool":
        return isinstance(v, bool)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    if shape == "int":
        return isinstance(v, int) and v > 0
    return math.isfinite(v) and v > 0


def problem(v: Any, shape: Shape, where: str = "") -> tuple[str, str] | None:
    """(the key, what is wrong) where `v` does not have `shape`, or None."""
    if isinstance(shape, str):
        return None if _scalar(v, shape) else (where, f"must be {_WORDS[shape]}, not {_show(v)}")
    if isinstance(shape, tuple):
        if not isinstance(v, list):
            return where, f"must be a list, not {_show(v)}"
        for i, item in enumerate(v):
            if (p := problem(item, shape[1], f"{where}[{i}]")) is not None:
                return p
        return None
    return _table_problem(v, shape, where)


def _table_problem(v: Any, shape: dict[str, Shape], where: str) -> tuple[str, str] | None:
    if not isinstance(v, dict):
        return where, f"must be a table, not {_show(v)}"
    for key, sub in shape.items():
        name = key.rstrip("?")
        if key == "*" or (name not in v and key.endswith("?")):
            continue
        if name not in v:
            return _join(where, name), "missing"
        if (p := problem(v[name], sub, _join(where, name))) is not None:
            return p
    return _others_problem(v, shape, where) if "*" in shape else None


def _others_problem(v: dict[str, Any], shape: dict[str, Shape], where: str) -> tuple[str, str] | None:
    """The keys `shape` does not name, each of shape["*"] (None: none allowed)."""
    named = {k.rstrip("?") for k in shape if k != "*"}
    for key, item in v.items():
        if key in named:
            continue
        if shape["*"] is None:
            return _join(where, key), f"not a key kernelcheck knows (known: {', '.join(sorted(named))})"
        if (p := problem(item, shape["*"], _join(where, key))) is not None:
            return p
    return None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _show(v: Any) -> str:
    kind = {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(type(v), type(v).__name__)
    text = repr(v)
    return f"{kind} ({text[:40]}{'...' if len(text) > 40 else ''})" if not isinstance(v, dict | list) else kind


def check(name: str, data: dict[str, Any], source: Path) -> None:
    """BadInput naming `source` and the key when `data` (the file `name` of matrix/) lacks its shape."""
    shape = SHAPES.get(name)
    if shape is None:
        return
    if (p := problem(data, shape)) is not None:
        raise bad(source, p[0] or "(top level)", p[1])


def bad(source: Path, key: str, what: str) -> BadInput:
    fix = "Fix that file" if key.startswith("(") else "Fix that key"
    return BadInput(f"{source}: {key}: {what}. {fix} (kernelcheck's own matrix/ folder holds the same file in its "
                    "form), or unset KERNELCHECK_MATRIX_DIR to use the shipped data.")


def read_toml(source: Path) -> dict[str, Any]:
    """One matrix file, parsed and checked against its shape: a missing, unreadable, malformed or wrong-typed file
    is BadInput naming it (a KERNELCHECK_MATRIX_DIR copy is the user's file)."""
    try:
        with open(source, "rb") as fh:
            data = tomllib.load(fh)
    except (FileNotFoundError, NotADirectoryError):
        raise bad(source, "(whole file)", "missing: the matrix folder needs every file of kernelcheck's matrix/") \
            from None
    except OSError as exc:
        raise bad(source, "(whole file)", f"not readable ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise bad(source, "(whole file)", "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise bad(source, "(whole file)", f"not valid TOML ({exc})") from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise bad(source, "(whole file)", "nested too deeply to read (arrays or tables inside each other)") from None
    check(source.name, data, source)
    return data


def read_config(source: Path) -> dict[str, Any]:
    """A config.json models.toml's aliases name (configs/): a JSON object with a model_type string, or BadInput."""
    try:
        with open(source, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise bad(source, "(whole file)", f"not readable ({exc.strerror or exc}); models.toml's aliases name it as "
                  "a config") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise bad(source, "(whole file)", f"not a JSON config ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise bad(source, "model_type", "a config is a JSON object with a model_type string")
    return data


T = TypeVar("T")


def typed(name: str) -> Callable[[Callable[[Path], T]], Callable[[Path], T]]:
    """A typed reader of the folder `root` whose files do not fit together in a way the shapes do not pin (a key
    one table names missing from another): BadInput naming `name` in that folder, not a KeyError."""

    def deco(fn: Callable[[Path], T]) -> Callable[[Path], T]:
        @functools.wraps(fn)
        def wrapper(root: Path) -> T:
            try:
                return fn(root)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise bad(root / name, "(the matrix folder)", f"an entry lacks a key or has the wrong type "
                          f"({type(exc).__name__}: {exc})") from None

        return wrapper

    return deco
