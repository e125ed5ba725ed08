"""The layout's rules, checked: no import cycle (module-level or deferred), small modules, one home per concept."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "kernelcheck"


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the tests here (they walk every module)."""
    return ast.parse(path.read_text())


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(_tree(path)))


def _imports() -> dict[str, set[str]]:
    """Module -> the kernelcheck modules it imports, the root package itself included (`import kernelcheck`, `from
    kernelcheck import __version__`): the root's deferred imports reach every command, so an import of it from
    inside the package closes a cycle."""
    mods: dict[str, set[str]] = {}
    for p in PKG.rglob("*.py"):
        name = ".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        deps: set[str] = set()
        for n in _nodes(p):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("kernelcheck"):
                names = {f"{n.module}.{a.name}" for a in n.names}
                deps.update(names)
                if n.module != "kernelcheck" or not names <= _SUBMODULES:
                    deps.add(n.module)
            elif isinstance(n, ast.Import):
                deps.update(a.name for a in n.names if a.name.startswith("kernelcheck"))
        mods[name] = deps
    return {k: {d for d in v if d in mods and d != k} for k, v in mods.items()}


_SUBMODULES = {".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
               for p in PKG.rglob("*.py")}


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


# The layers, bottom first: a module imports from its own package or from a lower layer, never from its own layer's
# other packages or a higher one, deferred (function-level) imports included. The order is the package map's
# (CONTRIBUTING.md): shared facts at the bottom; the code that knows other projects over them; the typed report
# every command fills; the parts that stand alone; doctor (which adds hub's section); install and verify (which
# run doctor again); the commands (each one's assembly point, commands/); the CLI; the front door
# (kernelcheck/__init__.py's library API, kernelcheck/__main__.py).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core", "schemas"),
    ("integrations",),
    ("report",),
    ("packing", "padding", "trace", "hub", "fleet", "forecast"),
    ("budget",),
    ("doctor",),
    ("install", "verify", "ray"),
    ("warm",),
    ("commands",),
    ("cli",),
    ("__init__", "__main__"),
)
# `from kernelcheck import __version__` and `import kernelcheck` reach the front door (the top layer): the package's
# metadata lives in core/version.py (`__version__`, `SCHEMA`, `PACKAGE`), which the front door re-exports for users.


def _package_of(module: str) -> str:
    """kernelcheck.doctor.run -> doctor; kernelcheck (the root, its __init__) -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imported(node: ast.AST, pkg_names: set[str]) -> list[str]:
    """The kernelcheck packages an import statement reaches ("__init__" for the root package itself)."""
    if isinstance(node, ast.ImportFrom) and node.module == "kernelcheck":
        return [a.name if a.name in pkg_names else "__init__" for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kernelcheck."):
        return [_package_of(node.module)]
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name.split(".")[0] == "kernelcheck"]
        return [_package_of(n) for n in names]
    return []


def upward_imports(pkg: Path, layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """Every import in `pkg` that points to a higher layer, or across to another package of the same layer, as
    "file:line: importer -> imported"; a package missing from `layers` is reported too."""
    rank = {name: i for i, names in enumerate(layers) for name in names}
    pkg_names = {p.name for p in pkg.iterdir() if (p / "__init__.py").exists()}
    out = [f"{name}/: in no layer (add it to LAYERS)" for name in sorted(pkg_names - rank.keys())]
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg)
        src = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in _nodes(path):
            for dst in _imported(node, pkg_names):
                if dst == src or rank.get(src, -1) > rank.get(dst, len(layers)):
                    continue
                out.append(f"{rel}:{getattr(node, 'lineno', 0)}: {src} -> {dst}")
    return out


def test_every_import_points_down_the_layers_even_deferred_ones() -> None:
    assert upward_imports(PKG) == [], "imports against the layers (tests/unit/test_architecture.py LAYERS)"


def test_an_upward_or_sideways_import_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    root = tmp_path / "kernelcheck"
    for name, text in {"core/__init__.py": "", "core/m.py": "def f():\n    from kernelcheck.doctor import run\n",
                       "hub/__init__.py": "", "hub/check.py": "from kernelcheck.trace import reader\n",
                       "trace/__init__.py": "from kernelcheck.core import m\nfrom kernelcheck import __version__\n",
                       "doctor/__init__.py": "", "doctor/run.py": "import kernelcheck.hub.check\n",
                       "extra/__init__.py": ""}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert upward_imports(root) == ["extra/: in no layer (add it to LAYERS)", "core/m.py:2: core -> doctor",
                                    "hub/check.py:1: hub -> trace", "trace/__init__.py:2: trace -> __init__"]


def root_imports(pkg: Path) -> list[str]:
    """Every import of the package root from inside the package (`import kernelcheck`, `from kernelcheck import
    __version__`), as "file:line"; `from kernelcheck import schemas` imports a subpackage, not the root's names."""
    subpackages = {p.parent.name for p in pkg.glob("*/__init__.py")} | {p.stem for p in pkg.glob("*.py")}
    out = []
    for path in sorted(pkg.rglob("*.py")):
        if path == pkg / "__init__.py":
            continue
        for n in _nodes(path):
            root = (isinstance(n, ast.Import) and any(a.name == "kernelcheck" for a in n.names)) or (
                isinstance(n, ast.ImportFrom) and n.module == "kernelcheck"
                and any(a.name not in subpackages for a in n.names))
            if root:
                out.append(f"{path.relative_to(pkg)}:{getattr(n, 'lineno', 0)}")
    return out


def test_no_module_imports_the_package_root() -> None:
    """The root's deferred imports reach every command: an import of it from inside closes a loop (kernelcheck ->
    integrations.kernels_prefetch -> integrations.kernels_hub -> kernelcheck). Its metadata is core/version.py's."""
    assert root_imports(PKG) == []


def test_an_import_of_the_package_root_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    root = tmp_path / "kernelcheck"
    for name, text in {"__init__.py": "__version__ = '1'\n", "core/__init__.py": "",
                       "core/m.py": "from kernelcheck import __version__\nfrom kernelcheck import core\n",
                       "core/n.py": "def f():\n    import kernelcheck\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert root_imports(root) == ["core/m.py:1", "core/n.py:2"]

def test_no_module_is_over_500_lines() -> None:
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_environment_variables_are_read_in_core_settings_only() -> None:
    pattern = re.compile(r"os\.environ(?:\.get)?\s*[\[(]\s*[\"'](KERNELCHECK_\w+|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE)")
    found = [f"{p.relative_to(PKG)}: {m.group(1)}" for p in PKG.rglob("*.py") if p.name != "settings.py"
             for m in pattern.finditer(p.read_text())]
    assert found == [], found


# Writes to a FunctionStatus's decided fields outside core/decide.py; the two listed are other records' fields.
_DECIDED = {"status", "reason", "fix", "implementation", "provider"}
_NOT_A_FUNCTION_STATUS = {("doctor/imports.py", "c.status"),  # a child process's wait status
                          ("verify/instrument.py", "stack[-1].implementation"),  # a call record
                          ("hub/check.py", "row.implementation")}  # a Hub row's copy of the decided one


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
        for n in _nodes(p):
            for t in _targets(n):
                if isinstance(t, ast.Attribute) and t.attr in _DECIDED \
                        and (rel, ast.unparse(t)) not in _NOT_A_FUNCTION_STATUS:
                    writes.append(f"{rel}:{getattr(n, 'lineno', '?')}: {ast.unparse(t)} =")
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


def test_mypy_is_strict_for_the_whole_package() -> None:
    """The whole package is type-checked with mypy's strict mode (pyproject
    [tool.mypy] strict = true, no override loosens a kernelcheck module), and a `# type: ignore` names its error
    code."""
    import tomllib

    cfg = tomllib.loads((PKG.parent / "pyproject.toml").read_text())["tool"]["mypy"]
    assert cfg.get("strict") is True, cfg
    loosened = [o["module"] for o in cfg.get("overrides", [])
                if any(m == "kernelcheck" or m.startswith("kernelcheck.") for m in o["module"])]
    assert loosened == [], loosened
    bare = [f"{p.relative_to(PKG)}:{i}" for p in sorted(PKG.rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"#\s*type:\s*ignore(?!\[)", line)]
    assert bare == [], bare


def test_the_tests_held_to_strict_typing_exist_and_are_checked_in_ci() -> None:
    """The test modules pyproject lists as strict (the override that turns their errors back on) are files here, and
    .ci/run's mypy step checks tests/unit: a renamed module would otherwise drop out of the check unnoticed."""
    import tomllib

    cfg = tomllib.loads((PKG.parent / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [m for o in cfg.get("overrides", []) if o.get("ignore_errors") is False for m in o["module"]]
    assert strict and all(m.startswith("tests.unit.") for m in strict), strict
    missing = [m for m in strict if not (PKG.parent / (m.replace(".", "/") + ".py")).is_file()]
    assert missing == [], missing
    assert "mypy kernelcheck tests/unit" in (PKG.parent / ".ci" / "run").read_text()


def test_no_module_imports_an_underscored_name_from_another() -> None:
    """A name another module needs is public (a split module's side door gets a public name)."""
    found = []
    for p in PKG.rglob("*.py"):
        for node in _nodes(p):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelcheck"):
                found += [f"{p.relative_to(PKG)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, found


def test_every_exception_kernelcheck_raises_is_defined_in_core_errors() -> None:
    """One home for what kernelcheck raises: no exception class is defined elsewhere."""
    bases = ("Exception", "Error", "Failed", "Failure", "Interrupt", "Unusable", "Host")
    elsewhere = []
    for path in sorted(PKG.rglob("*.py")):
        if path.relative_to(PKG).as_posix() == "core/errors.py":
            continue
        for node in _nodes(path):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith(bases) for b in node.bases):
                elsewhere.append(f"{path.relative_to(PKG)}:{node.lineno}: {node.name}")
    assert elsewhere == []


def test_a_module_alias_ending_in_mod_is_there_only_where_the_plain_name_is_taken() -> None:
    """`from kernelcheck.core import matrix as matrix_mod` only where `matrix` names something else in the file (a
    variable, an argument): elsewhere the module goes by its own name (no *_mod aliases)."""
    needless = []
    for path in sorted(PKG.rglob("*.py")):
        nodes = _nodes(path)
        taken = {n.id for n in nodes if isinstance(n, ast.Name)}
        taken |= {n.arg for n in nodes if isinstance(n, ast.arg)}
        taken |= {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        taken |= {n.arg for n in nodes if isinstance(n, ast.keyword) and n.arg}
        taken |= {a.asname or a.name for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))
                  for a in n.names if not (a.asname or "").endswith("_mod")}
        for n in nodes:
            if isinstance(n, ast.ImportFrom):
                needless += [f"{path.relative_to(PKG)}:{n.lineno}: {a.name} as {a.asname}" for a in n.names
                             if (a.asname or "").endswith("_mod") and a.name not in taken]
    assert needless == []


def _matrix_names(nodes: tuple[ast.AST, ...]) -> set[str]:
    """The names a file binds core/matrix.py to (`from kernelcheck.core import matrix as m_data`, `import
    kernelcheck.core.matrix`), so a load under any alias is counted."""
    out = {"matrix"}
    for n in nodes:
        if isinstance(n, ast.ImportFrom) and n.module == "kernelcheck.core":
            out |= {a.asname or a.name for a in n.names if a.name == "matrix"}
        elif isinstance(n, ast.Import):
            out |= {a.asname or a.name for a in n.names if a.name == "kernelcheck.core.matrix"}
    return out


def matrix_loads(pkg: Path) -> dict[str, int]:
    """file -> how many times it calls core/matrix.py `load()` (under any name the file binds the module to, or
    `load()` inside core/matrix.py)."""
    out: dict[str, int] = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = str(path.relative_to(pkg))
        nodes = _nodes(path)
        loads = {f"{name}.load" for name in _matrix_names(nodes)} | ({"load"} if rel == "core/matrix.py" else set())
        for n in nodes:
            if isinstance(n, ast.Call) and not n.args and ast.unparse(n.func) in loads:
                out[rel] = out.get(rel, 0) + 1
    return out


def signature_loads(pkg: Path) -> dict[str, int]:
    """file -> how many times it reads matrix/signatures.toml: a call of any `load_signatures` (public or not)."""
    out: dict[str, int] = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = str(path.relative_to(pkg))
        for n in _nodes(path):
            if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1].lstrip("_") == "load_signatures":
                out[rel] = out.get(rel, 0) + 1
    return out


# Where the matrix is loaded (was 37 sites in 32 modules): in one function, core/entry.py `matrix()`. Its callers
# are the entry points (MATRIX_READERS): a command's Context.matrix (the library's entry points build a Context
# too), and a child process that a command starts in a fresh interpreter, which holds no parent's matrix and reads
# its own at its entry point (the same folder: KERNELCHECK_MATRIX_DIR is inherited with the environment). Every
# other function is passed the matrix as `m`. The trace signatures are part of it: `Matrix.signatures` reads the same
# folder's signatures.toml on first use (the one read of that file, SIGNATURE_LOADS), so trace and verify's evidence
# are passed the matrix (or its signatures) as well.
MATRIX_LOADS = {"core/entry.py": 1}
SIGNATURE_LOADS = {"core/matrix.py": 1}
MATRIX_READERS = {("commands/context.py", "matrix"), ("doctor/imports.py", "_child"),
                  ("verify/step_worker.py", "run"),
                  ("verify/packing.py", "main"),  # `python -m kernelcheck.verify.packing`: a process of its own
                  ("warm/child.py", "run")}  # `python -m kernelcheck.warm.child`: warm's own process


def test_the_matrix_is_loaded_in_one_place() -> None:
    assert matrix_loads(PKG) == MATRIX_LOADS


def test_the_trace_signatures_are_read_as_a_part_of_the_matrix_only() -> None:
    assert signature_loads(PKG) == SIGNATURE_LOADS


def test_the_counts_see_a_load_under_an_alias_and_a_signatures_read(tmp_path: Path) -> None:
    """The counters above can fail: a load under an alias and an ambient signatures read are both seen."""
    (tmp_path / "sneaky.py").write_text("from kernelcheck.core import matrix as md\n"
                                        "def f():\n"
                                        "    return md.load(), md.load_signatures(), md._load_signatures(1)\n")
    assert matrix_loads(tmp_path) == {"sneaky.py": 1}
    assert signature_loads(tmp_path) == {"sneaky.py": 2}


# The files of the matrix folder are read through the Matrix value the entry point loaded (`m.table(name)`, `m.root`,
# threaded down as `m`), never from the environment-chosen folder: core/matrix.py `folder()` (KERNELCHECK_MATRIX_DIR
# or the shipped data) is asked by core/entry.py alone, whose `data_date` reads data.toml's date for `kernelcheck
# --version` and the issue report header, where no command runs and so no matrix is loaded. Counted: a call of any
# module-level reader (below) under any name a file binds core/matrix.py to, or imported from it by name.
AMBIENT_READERS = ("folder", "table", "data_file", "_load", "_root")
AMBIENT_READS = {"core/entry.py": 1}


def ambient_reads(pkg: Path) -> dict[str, int]:
    """file -> how many times it reads a matrix file from the environment-chosen folder (outside core/matrix.py,
    where the folder is chosen and each read is of a given root)."""
    out: dict[str, int] = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = str(path.relative_to(pkg))
        if rel == "core/matrix.py":
            continue
        nodes = _nodes(path)
        calls = {f"{name}.{f}" for name in _matrix_names(nodes) for f in AMBIENT_READERS}
        calls |= {a.asname or a.name for n in nodes if isinstance(n, ast.ImportFrom)
                  and n.module == "kernelcheck.core.matrix" for a in n.names if a.name in AMBIENT_READERS}
        for n in nodes:
            if isinstance(n, ast.Call) and ast.unparse(n.func) in calls:
                out[rel] = out.get(rel, 0) + 1
    return out


def test_no_module_reads_the_matrix_folder_from_the_environment() -> None:
    assert ambient_reads(PKG) == AMBIENT_READS


def test_the_ambient_count_sees_each_form_of_a_planted_read(tmp_path: Path) -> None:
    """The counter above can fail: module-level table/data_file/_load/folder under an alias, the dotted module path
    and a name imported from core/matrix.py are each seen; a Matrix value's own `m.table(...)` is not."""
    (tmp_path / "sneaky.py").write_text("import kernelcheck.core.matrix\n"
                                        "from kernelcheck.core import matrix as md\n"
                                        "from kernelcheck.core.matrix import table as t\n"
                                        "def f(m):\n"
                                        "    md.table('verify.toml'), md.data_file('gpus.toml'), md._load('x')\n"
                                        "    kernelcheck.core.matrix.folder(), t('torch.toml')\n"
                                        "    return m.table('verify.toml')\n")
    assert ambient_reads(tmp_path) == {"sneaky.py": 5}


def test_only_the_entry_points_read_the_matrix() -> None:
    asked = set()
    for path in sorted(PKG.rglob("*.py")):
        for f in _nodes(path):
            if isinstance(f, ast.FunctionDef) and any(isinstance(n, ast.Call) and ast.unparse(n.func).endswith(
                    "entry.matrix") for n in ast.walk(f)):
                asked.add((str(path.relative_to(PKG)), f.name))
    assert asked == MATRIX_READERS


# Each of these has one address: every import of it names its home, no module passes it on (a re-export hall).
HOMES = {"Finding": "kernelcheck.core.status", "FunctionStatus": "kernelcheck.core.status",
         "Step": "kernelcheck.core.plan_step", "StepKind": "kernelcheck.core.plan_step",
         "TransformersHub": "kernelcheck.integrations.transformers_hub",
         "HubRepo": "kernelcheck.integrations.transformers_hub"}


def test_finding_step_and_transformers_hub_are_imported_from_their_one_home() -> None:
    from tests.sources import repo_files

    elsewhere = []
    for under in ("kernelcheck", "tests", "scripts"):
        for path in sorted(p for p in repo_files(under) if p.suffix == ".py"):
            text = path.read_text()
            if not any(f"{name}{end}" in text for name in HOMES for end in (",", ")", "\n", " ")):
                continue  # none of the names is imported here (an import line ends or goes on after each)
            for n in _nodes(path):
                if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("kernelcheck"):
                    elsewhere += [f"{path.relative_to(PKG.parent)}:{n.lineno}: {a.name} from {n.module}"
                                  for a in n.names if HOMES.get(a.name, n.module) != n.module]
    assert elsewhere == []
    halls = ("report/model.py", "install/plan_types.py", "install/plan.py", "integrations/kernels_hub.py")
    assert [h for h in halls if "re-exported" in (PKG / h).read_text()] == []


# What the CLI may take from the packages below the commands: how to render an Outcome, install's own Request, and
# --all-ranks' plumbing (the handoff of a rank's report, the rank it is). Everything a command assembles is in
# commands/ (kernelcheck/__init__.py calls the same run).
CLI_MAY_IMPORT = {"kernelcheck.forecast": {"render"}, "kernelcheck.trace.render": {"render_text"},
                  "kernelcheck.install.command": {"Request", "render", "to_json"},
                  "kernelcheck.fleet": {"handoff", "ranks"}}
_ASSEMBLED = ("doctor", "verify", "hub", "install", "trace", "packing", "padding", "fleet", "forecast", "warm")


def test_the_cli_assembles_no_command_it_renders_what_commands_run() -> None:
    found = []
    for path in sorted((PKG / "cli").glob("*.py")):
        for n in _nodes(path):
            if isinstance(n, ast.ImportFrom) and n.module and _package_of(n.module) in _ASSEMBLED:
                found += [f"cli/{path.name}:{n.lineno}: {n.module}.{a.name}" for a in n.names
                          if a.name not in CLI_MAY_IMPORT.get(n.module, set())]
    assert found == []
