"""The op-class table (matrix/op_classes.toml) and the GPU peaks (matrix/gpus.toml), typed and checked.

A kernel's class is decided from names the trace holds: its own name (kernel rules, first match wins) or the CPU
op or user annotation open on the host when it was launched (range rules, innermost range wins; they win over
kernel rules). A name's class is computed once per distinct name (`Classifier.of_kernel`, `Classifier.of_range`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kernelcheck.core import matrix
from kernelcheck.core.matrix_shape import bad

FLOORS = ("compute", "memory", "zero", "none")
TABLE = "op_classes.toml"
IDLE, HOST_SYNC = "idle", "host_sync"  # the classes the GPU timeline's gaps fill (not kernel names)


@dataclass(frozen=True)
class OpClass:
    id: str
    title: str
    floor: str  # FLOORS


@dataclass(frozen=True)
class Rule:
    op_class: str
    pattern: re.Pattern[str]
    by_range: bool  # the pattern names the CPU range that launched the kernel, not the kernel
    reference: str


@dataclass(frozen=True)
class Cause:
    id: str
    op_class: str
    kernel: re.Pattern[str] | None
    range: re.Pattern[str] | None
    unless: re.Pattern[str] | None  # the cause does not apply when a kernel of the class matches this
    min_ms: float
    cause: str
    fix: str
    reference: str


@dataclass(frozen=True)
class Peak:
    gpu: str
    name: re.Pattern[str]
    bf16_tflops: float
    hbm_tb_s: float
    reference: str


@dataclass(frozen=True)
class OpTable:
    classes: tuple[OpClass, ...]
    rules: tuple[Rule, ...]
    causes: tuple[Cause, ...]
    peaks: tuple[Peak, ...] = ()

    @property
    def class_ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.classes)

    def title(self, cid: str) -> str:
        return next((c.title for c in self.classes if c.id == cid), cid)

    def peak_for(self, device_name: str | None) -> Peak | None:
        """The first peak row whose name pattern is found in the device name."""
        if not device_name:
            return None
        return next((p for p in self.peaks if p.name.search(device_name)), None)


def _regex(text: str, source: Any, where: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise bad(source, where, f"not a regular expression ({exc})") from None


def load(m: matrix.Matrix) -> OpTable:
    """The op-class table and the peaks of the matrix `m`, checked beyond their shapes: each rule names a known
    class and exactly one of kernel/range, every pattern compiles, the two gap classes exist."""
    data = m.table(TABLE)
    source = m.root / TABLE
    classes = tuple(OpClass(c["id"], c["title"], c["floor"]) for c in data["class"])
    ids = [c.id for c in classes]
    for i, c in enumerate(classes):
        if c.floor not in FLOORS:
            raise bad(source, f"class[{i}].floor", f"{c.floor!r} is not one of {', '.join(FLOORS)}")
        if ids.count(c.id) > 1:
            raise bad(source, f"class[{i}].id", f"{c.id!r} is defined twice")
    for need in (IDLE, HOST_SYNC):
        if need not in ids:
            raise bad(source, "class", f"no class with id {need!r} (the GPU timeline's gaps go there)")
    rules = _rules(data["rule"], ids, source)
    causes = _causes(data["cause"], ids, source)
    gpus = m.table("gpus.toml")
    peaks = tuple(Peak(p["gpu"], _regex(p["name"], m.root / "gpus.toml", f"peak[{i}].name"), float(p["bf16_tflops"]),
                       float(p["hbm_tb_s"]), p["reference"]) for i, p in enumerate(gpus.get("peak", [])))
    return OpTable(classes, rules, causes, peaks)


def _rules(data: list[dict[str, Any]], ids: list[str], source: Any) -> tuple[Rule, ...]:
    rules = []
    for i, r in enumerate(data):
        if r["class"] not in ids:
            raise bad(source, f"rule[{i}].class", f"{r['class']!r} is not a [[class]] id")
        if ("kernel" in r) == ("range" in r):
            raise bad(source, f"rule[{i}]", "give exactly one of kernel = '...' or range = '...'")
        key = "kernel" if "kernel" in r else "range"
        rules.append(Rule(r["class"], _regex(r[key], source, f"rule[{i}].{key}"), key == "range", r["reference"]))
    return tuple(rules)


def _causes(data: list[dict[str, Any]], ids: list[str], source: Any) -> tuple[Cause, ...]:
    causes = []
    for i, c in enumerate(data):
        if c["class"] not in ids:
            raise bad(source, f"cause[{i}].class", f"{c['class']!r} is not a [[class]] id")
        causes.append(Cause(
            c["id"], c["class"],
            _regex(c["kernel"], source, f"cause[{i}].kernel") if "kernel" in c else None,
            _regex(c["range"], source, f"cause[{i}].range") if "range" in c else None,
            _regex(c["unless"], source, f"cause[{i}].unless") if "unless" in c else None,
            float(c["min_ms"]), c["cause"], c["fix"], c["reference"]))
    return tuple(causes)


@dataclass
class Classifier:
    """Class of a kernel name and of a CPU range name, each decided once per distinct name."""

    table: OpTable
    _kernel: dict[str, str | None] = field(default_factory=dict)
    _range: dict[str, str | None] = field(default_factory=dict)

    def of_kernel(self, name: str) -> str | None:
        """The class of the first kernel rule whose pattern is found in `name`; None: unclassified."""
        hit = self._kernel.get(name, "")
        if hit == "":
            hit = self._kernel[name] = next((r.op_class for r in self.table.rules
                                             if not r.by_range and r.pattern.search(name)), None)
        return hit

    def of_range(self, name: str) -> str | None:
        """The class of the first range rule whose pattern is found in the CPU range's name; None: no rule."""
        hit = self._range.get(name, "")
        if hit == "":
            hit = self._range[name] = next((r.op_class for r in self.table.rules
                                            if r.by_range and r.pattern.search(name)), None)
        return hit

    def wants_range(self, name: str) -> bool:
        """Whether a CPU range of this name matters: a range rule or a cause names it."""
        if self.of_range(name) is not None:
            return True
        key = "\x00cause:" + name
        hit = self._range.get(key, "")
        if hit == "":
            hit = self._range[key] = "y" if any(c.range is not None and c.range.search(name)
                                                 for c in self.table.causes) else None
        return hit is not None
