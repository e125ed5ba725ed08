"""Where a modeling source calls its fast functions, and which Hub hooks it declares (read, never imported).

Two things transformers 5.25 added that the decorator reading alone (integrations/transformers.py) misses:
- the chunked (prefill / training) path can call the recurrent ("decode") function for the last tokens when
  the cache keeps intermediate recurrent states (`cache.get_recurrent_states_to_keep(...)`, turned on by
  `Cache.activate_past_recording`): a decode-phase function is then not confined to single-token decode;
- functions decorated with `use_kernel_forward_from_hub(name)` (kernels turns them into replaceable modules)
  and the functions a layer lists in `use_kernelized_func([...])`: hooks `kernelize` can replace as a whole
  (5.25's `causal_conv1d_forward`, around `causal_conv1d_fn` / `causal_conv1d_update`).
Any other `use_kernel*` decorator is returned as unread, so that doctor warns instead of staying silent.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kernelcheck.integrations import transformers

KNOWN_DECORATORS = ("use_kernel_func_from_hub_with_fallback", "use_kernel_forward_from_hub", "use_kernelized_func",
                    "use_kernel_func_from_hub")
# Decorators that make a whole function a hook `kernelize` can replace (use_kernels=True): 5.25's
# use_kernel_forward_from_hub on a function, and kernels' use_kernel_func_from_hub (transformers 5.13-5.14:
# @use_kernel_func_from_hub("rotary_pos_emb") on apply_rotary_pos_emb; kernels 0.15.2 layer/func.py:167, "the
# function will be exposed as an instance of torch.nn.Module ... to be kernelized"). Without kernelize the body runs.
FUNCTION_HOOKS = ("use_kernel_forward_from_hub", "use_kernel_func_from_hub")


@dataclass(frozen=True)
class OutsideDecode:
    """A call of a decode-phase function outside any single-token decode branch."""

    registered: str  # the name the decorator registers (kernelcheck's function name, before `misnamed`)
    attribute: str  # the decorated torch function's name in the module
    caller: str  # Class.method or function holding the call
    line: int
    recording: bool  # the caller asks the cache for intermediate states (get_recurrent_states_to_keep)


class Unread(NamedTuple):
    """A `use_kernel*` decorator the reader does not know: its name, what it decorates, its line."""

    decorator: str
    on: str
    line: int

    def __str__(self) -> str:
        return f"@{self.decorator} on {self.on} (line {self.line})"


@dataclass(frozen=True)
class Hooks:
    """Hub hooks of one modeling module."""

    forward_functions: tuple[tuple[str, str, int, tuple[str, ...]], ...]  # (function, layer name, line, the
    # registered names of the decorated fast functions its body calls)
    kernelized: tuple[tuple[str, tuple[str, ...], int], ...]  # (class, listed function names, line)
    unread: tuple[Unread, ...]  # `use_kernel*` decorators the reader does not know


def _module_path(dotted: str) -> Path | None:
    tdir = transformers.transformers_dir()
    parts = dotted.split(".")
    if tdir is None or len(parts) != 4 or parts[:2] != ["transformers", "models"]:
        return None
    return tdir / "models" / parts[2] / f"{parts[3]}.py"


def _tree(dotted: str) -> ast.Module | None:
    path = _module_path(dotted)
    if path is None:
        return None
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def _decorator_name(dec: ast.expr) -> str:
    node = dec.func if isinstance(dec, ast.Call) else dec
    return getattr(node, "id", getattr(node, "attr", ""))


def _is_decode_test(test: ast.expr) -> bool:
    """`seq_len == 1`, `x.shape[1] == 1`, `cache_position[0] > 0`: a test that only single-token decode passes."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.comparators[0], ast.Constant):
            op, value = node.ops[0], node.comparators[0].value
            if (isinstance(op, ast.Eq) and value == 1) or (isinstance(op, ast.Gt) and value == 0
                                                           and isinstance(node.left, ast.Subscript)):
                return True
    return False


def _calls_outside_decode(body: list[ast.stmt], names: set[str], in_decode: bool = False) -> list[ast.Call]:
    out: list[ast.Call] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out += _expr_calls(stmt.test, names, in_decode)
            out += _calls_outside_decode(stmt.body, names, in_decode or _is_decode_test(stmt.test))
            out += _calls_outside_decode(stmt.orelse, names, in_decode)
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # a nested definition is its own caller
        children = [c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.stmt)]
        exprs = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)]
        for e in exprs:
            out += _expr_calls(e, names, in_decode)
        if children:
            out += _calls_outside_decode(children, names, in_decode)
    return out


def _expr_calls(node: ast.AST, names: set[str], in_decode: bool) -> list[ast.Call]:
    if in_decode:
        return []
    return [c for c in ast.walk(node) if isinstance(c, ast.Call) and getattr(c.func, "id", None) in names]


def _callers(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    out: list[tuple[str, ast.FunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            out += [(f"{node.name}.{n.name}", n) for n in node.body if isinstance(n, ast.FunctionDef)]
    return out


def _registered(tree: ast.Module) -> dict[str, str]:
    """decorated attribute -> the name its `use_kernel_func_from_hub_with_fallback(name, ...)` registers."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                if _decorator_name(dec) == "use_kernel_func_from_hub_with_fallback" and isinstance(dec, ast.Call) \
                        and dec.args and isinstance(dec.args[0], ast.Constant):
                    out[node.name] = str(dec.args[0].value)
    return out


def decode_calls_outside_decode(dotted: str, decode_functions: set[str]) -> list[OutsideDecode]:
    """Calls of the decorated functions registered as `decode_functions` that no single-token decode test
    guards, in transformers.models.<m>.modeling_<m> (`dotted`); [] when the source cannot be read."""
    tree = _tree(dotted)
    if tree is None:
        return []
    registered = {a: r for a, r in _registered(tree).items() if r in decode_functions}
    if not registered:
        return []
    out = []
    for caller, fn in _callers(tree):
        if fn.name in registered:
            continue
        calls = _calls_outside_decode(fn.body, set(registered))
        if not calls:
            continue
        recording = any(isinstance(n, ast.Attribute) and n.attr == "get_recurrent_states_to_keep"
                        for n in ast.walk(fn))
        for c in calls:
            attr = getattr(c.func, "id", "")
            out.append(OutsideDecode(registered[attr], attr, caller, c.lineno, recording))
    return out


def hooks(dotted: str) -> Hooks:
    """The Hub hooks of transformers.models.<m>.modeling_<m> (`dotted`), read from its source."""
    tree = _tree(dotted)
    return hooks_of(tree) if tree is not None else Hooks((), (), ())


def hooks_of(tree: ast.Module) -> Hooks:
    """The Hub hooks of one parsed modeling source."""
    forward: list[tuple[str, str, int, tuple[str, ...]]] = []
    registered = _registered(tree)
    kernelized: list[tuple[str, tuple[str, ...], int]] = []
    unread: list[Unread] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):
            continue
        for dec in node.decorator_list:
            name = _decorator_name(dec)
            if not name.startswith("use_kernel"):
                continue
            if name not in KNOWN_DECORATORS:
                unread.append(Unread(name, node.name, dec.lineno))
            elif name in FUNCTION_HOOKS and isinstance(node, ast.FunctionDef):
                arg = dec.args[0] if isinstance(dec, ast.Call) and dec.args else None
                called = tuple(dict.fromkeys(registered[c.func.id] for c in ast.walk(node) if isinstance(c, ast.Call)
                                             and isinstance(c.func, ast.Name) and c.func.id in registered))
                forward.append((node.name, str(arg.value) if isinstance(arg, ast.Constant) else node.name,
                                dec.lineno, called))
            elif name == "use_kernelized_func" and isinstance(dec, ast.Call):
                listed = [e for a in dec.args for e in (a.elts if isinstance(a, ast.List | ast.Tuple) else [a])]
                names = tuple(getattr(e, "id", None) or ast.unparse(e) for e in listed)
                kernelized.append((node.name, names, dec.lineno))
    return Hooks(tuple(forward), tuple(kernelized), tuple(unread))
