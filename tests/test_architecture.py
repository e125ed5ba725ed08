"""The layout's rules, checked: no import cycle (module-level or deferred), small modules, one home per concept."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "kernelcheck"


def _imports() -> dict[str, set[str]]:
    mods: dict[str, set[str]] = {}
    for p in PKG.rglob("*.py"):
        name = ".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        deps: set[str] = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("kernelcheck"):
                deps.add(n.module)
                deps.update(f"{n.module}.{a.name}" for a in n.names)
            elif isinstance(n, ast.Import):
                deps.update(a.name for a in n.names if a.name.startswith("kernelcheck"))
        mods[name] = deps
    return {k: {d for d in v if d in mods and d != k} for k, v in mods.items()}


def test_no_import_cycle_even_through_deferred_imports() -> None:
    graph, state, stack, cycles = _imports(), {}, [], []

    def visit(u: str) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                cycles.append(" -> ".join([*stack[stack.index(v):], v]))
            elif not state.get(v):
                visit(v)
        state[u] = 2
        stack.pop()

    for m in sorted(graph):
        if not state.get(m):
            visit(m)
    assert not cycles, cycles


def test_shared_folders_keep_modules_under_500_lines() -> None:
    for folder in ("core", "report", "cli"):
        for p in (PKG / folder).glob("*.py"):
            assert len(p.read_text().splitlines()) <= 500, p


def test_environment_variables_are_read_in_core_settings_only() -> None:
    pattern = re.compile(r"os\.environ(?:\.get)?\s*[\[(]\s*[\"'](KERNELCHECK_\w+|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE)")
    found = [f"{p.relative_to(PKG)}: {m.group(1)}" for p in PKG.rglob("*.py") if p.name != "settings.py"
             for m in pattern.finditer(p.read_text())]
    assert found == [], found
