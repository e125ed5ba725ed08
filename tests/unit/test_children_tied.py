"""Every process kernelcheck starts dies with it (a SIGKILL of kernelcheck's pid leaves nothing running): each
subprocess call in the package passes `preexec_fn=lifeline.preexec()`, or goes through core/child.py (which
does), and each forked or spawned import child ties itself (lifeline.tie). Read from the source (ast)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kernelcheck"
CALLS = {"run", "Popen", "check_output", "call", "check_call"}
# programs that end by themselves in well under a second and hold nothing: a tie costs more than it saves
EXEMPT = {"kernelcheck/padding/plot.py"}


def _untied() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE.parent))
        if rel in EXEMPT:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
                    and not any(k.arg == "preexec_fn" for k in node.keywords)):
                out.append(f"{rel}:{node.lineno}")
    return out


def test_every_child_is_tied_to_kernelcheck() -> None:
    assert _untied() == []
