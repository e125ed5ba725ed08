"""Count the test asserts that match wording: `assert "some words" in <text>` (tests assert ids
and fields; the wording is tested once, at the renderer).

An assert counts when it holds a `"literal" in X` or `"literal" not in X` (a str or an f-string) whose X is text
by its name: stdout, stderr, out, output, text, message, reason, fix, err, lines, ... (TEXT below), read through
.lower()/.strip()/str()/[...]; `"Traceback" not in X` (CRASH: a crash, or another library's noise) does not count.

An assert that IS the one test of some wording is kept and marked with a trailing comment on one of its lines,
`# wording: WHY` (MARK), WHY saying whose words it tests: `renderer test` (a text renderer's test, the exit-2
message of bad input), `the docs' text` (what a document says), `the example's own words` (what a shipped example
script prints), `the help text`, or another project's own message (`kernels' own message`: what the real
package says, quoted by the test to prove that package really behaved so). Marked asserts are reported apart, not
among the ones to convert; mark only an assert whose purpose is to test that wording, once.

A literal looked for in a `fix` (`f["fix"]`, `finding.fix`) that is a command or a piece of one (COMMAND: it starts
with a command word or `--`, or holds a requirement spec `name==1.2`, an assignment `VAR=0` or a path/URL) reads the
fix's command, which is data (what to run), not wording: it does not count.
Usage: python scripts/wording_asserts.py [tests] [--files]
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

TEXT = frozenset({
    "stdout", "stderr", "out", "output", "text", "message", "reason", "fix", "err", "error", "lines", "line", "ln",
    "msg", "said", "why", "note", "log", "outs", "str", "repr", "render_text", "render", "getvalue", "exception",
    "rendered", "txt", "out0", "err0", "_error", "truth_error",
})
_THROUGH = ("lower", "strip", "rstrip", "upper", "casefold", "splitlines", "replace", "split")


def _name(node: ast.expr) -> str:
    """The name a text expression ends in: res.stdout.lower() -> stdout, str(exc) -> str, f["message"] -> message."""
    while True:
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _THROUGH:
                node = f.value
                continue
            if isinstance(f, ast.Attribute) and f.attr == "join" and node.args:
                node = node.args[0]
                continue
            return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                return node.slice.value
            node = node.value
            continue
        if isinstance(node, ast.Attribute):
            return node.attr
        return node.id if isinstance(node, ast.Name) else ""


MARK = "# wording:"
COMMAND = re.compile(r"^(kernelcheck|pip|python|uv|conda|export|unset)\b|^--|^[\w.\[\]-]+(==|>=|<=|~=|!=|=)|/")


def _command_in_fix(c: ast.Compare) -> bool:
    """`"pip install x" in f["fix"]`: the literal is a command (or a piece of one) looked for in a fix."""
    return _name(c.comparators[0]) == "fix" and isinstance(c.left, ast.Constant) and isinstance(c.left.value, str) \
        and bool(COMMAND.search(c.left.value))


# `"Traceback" not in stderr` guards against a crash, `"UserWarning" not in stderr` against another library's noise
# reaching the user (a warning, huggingface_hub's retries); they read no message's wording
CRASH = frozenset({"Traceback", "internal error", "Aborted!", "BrokenPipe", "UserWarning", "Retrying",
                   "thrown while requesting", "USDT", "profiler_start", "[transformers]", "falling back",
                   "install `flash-linear-attention`",
                   "stopped before a verdict"})  # an interruption (core/errors.Interrupted) is a crash here too


def _matches_wording(test: ast.expr) -> bool:
    for c in ast.walk(test):
        if isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.NotIn) and isinstance(c.left, ast.Constant) \
                and c.left.value in CRASH:
            continue
        if isinstance(c, ast.Compare) and isinstance(c.ops[0], (ast.In, ast.NotIn)) \
                and (isinstance(c.left, ast.JoinedStr) or (isinstance(c.left, ast.Constant)
                                                           and isinstance(c.left.value, str))) \
                and _name(c.comparators[0]) in TEXT and not _command_in_fix(c):
            return True
    return False


def _marked(node: ast.Assert, lines: list[str]) -> bool:
    """Whether one of the assert's lines carries the MARK (`# wording: renderer test`)."""
    return any(MARK in lines[i - 1] for i in range(node.lineno, (node.end_lineno or node.lineno) + 1))


def count(tests: Path) -> tuple[int, Counter[str], Counter[str]]:
    """(all asserts, wording asserts to convert per file, marked renderer-test asserts per file)."""
    total, per_file, marked = 0, Counter[str](), Counter[str]()
    for path in sorted(tests.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assert):
                total += 1
                if _matches_wording(node.test):
                    (marked if _marked(node, lines) else per_file)[str(path.relative_to(tests))] += 1
    return total, per_file, marked


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--files"]
    total, per_file, marked = count(Path(args[0] if args else "tests"))
    if "--files" in sys.argv:
        for name, n in per_file.most_common():
            print(f"{n:5} {name}")
        if marked:
            print("marked (# wording: ...):")
            for name, n in marked.most_common():
                print(f"{n:5} {name}")
    print(f"{sum(per_file.values())} of {total} asserts match wording; "
          f"{sum(marked.values())} more are marked tests of wording (# wording: ...)")
