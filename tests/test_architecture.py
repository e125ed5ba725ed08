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


def test_no_module_is_over_500_lines() -> None:
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_environment_variables_are_read_in_core_settings_only() -> None:
    pattern = re.compile(r"os\.environ(?:\.get)?\s*[\[(]\s*[\"'](KERNELCHECK_\w+|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE)")
    found = [f"{p.relative_to(PKG)}: {m.group(1)}" for p in PKG.rglob("*.py") if p.name != "settings.py"
             for m in pattern.finditer(p.read_text())]
    assert found == [], found


# Writes to a FunctionStatus's decided fields outside core/decide.py; the two listed are other records' fields.
_DECIDED = {"status", "reason", "fix", "implementation"}
_NOT_A_FUNCTION_STATUS = {("doctor/imports.py", "c.status"),  # a child process's wait status
                          ("verify/instrument.py", "stack[-1].implementation")}  # a call record


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, (ast.Assign,)):
        todo = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        todo = [node.target]
    else:
        return []
    out: list[ast.expr] = []
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        else:
            out.append(t)
    return out


def test_only_the_decider_decides_a_status_or_the_verdict() -> None:
    writes, verdicts = [], []
    for p in PKG.rglob("*.py"):
        rel = str(p.relative_to(PKG))
        if rel == "core/decide.py":
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            for t in _targets(n):
                if isinstance(t, ast.Attribute) and t.attr in _DECIDED \
                        and (rel, ast.unparse(t)) not in _NOT_A_FUNCTION_STATUS:
                    writes.append(f"{rel}:{n.lineno}: {ast.unparse(t)} =")
            if isinstance(n, ast.Call):
                name = ast.unparse(n.func)
                if name.endswith("replace") and any(k.arg in _DECIDED for k in n.keywords):
                    writes.append(f"{rel}:{n.lineno}: {name}(..., {', '.join(k.arg or '**' for k in n.keywords)})")
                if name.split(".")[-1] in ("verdict_of_status", "verdict_of_severity") and rel != "core/status.py":
                    verdicts.append(f"{rel}:{n.lineno}: {name}")
    assert writes == [], "statuses are decided in core/decide.py only: " + "; ".join(writes)
    assert verdicts == [], "the verdict is computed in core/decide.py only: " + "; ".join(verdicts)


def test_every_subpackage_is_in_the_wheel() -> None:
    import tomllib

    listed = set(tomllib.loads((PKG.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    here = {".".join(p.parent.relative_to(PKG.parent).parts) for p in PKG.rglob("__init__.py")}
    assert here - listed == set(), "pyproject.toml [tool.setuptools] packages misses these (pip install drops them)"
