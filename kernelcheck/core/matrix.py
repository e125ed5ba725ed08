"""Typed loader for matrix/*.toml: the project's data (models, packages, regimes, breakages)."""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from kernelcheck.core import matrix_shape, model_history
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Severity


def folder() -> Path:
    """The folder this process reads: KERNELCHECK_MATRIX_DIR when set (core/settings.py); else matrix/ beside the
    package in a checkout, or `kernelcheck._matrix` when installed from a wheel. Only core/entry.py asks."""
    from kernelcheck.core import settings

    chosen = settings.matrix_dir()
    return _checked_root(chosen) if chosen is not None else _shipped_root()


@functools.lru_cache(maxsize=4)
def _checked_root(chosen: Path) -> Path:
    """A KERNELCHECK_MATRIX_DIR folder, checked once per folder (not at each load())."""
    if not (chosen / "models.toml").is_file():
        raise BadInput(f"KERNELCHECK_MATRIX_DIR={chosen} has no models.toml: point it at a copy of kernelcheck's "
                       "matrix/ folder (every *.toml file of it), or unset it to use the shipped data.")
    for name in matrix_shape.SHAPES:  # every file, checked once, before any command reads one of them
        if name not in matrix_shape.OPTIONAL or (chosen / name).exists():
            _load(name, chosen)
    for alias in _load_matrix(chosen).aliases.values():
        if alias.config:
            matrix_shape.read_config(chosen / alias.config)
    return chosen


@functools.lru_cache(maxsize=1)
def _shipped_root() -> Path:
    here = Path(__file__).resolve().parents[2] / "matrix"
    if (here / "models.toml").exists():
        return here
    return Path(str(resources.files("kernelcheck._matrix")))


def _load(name: str, root: Path) -> dict[str, Any]:
    """One matrix file, parsed and checked against its shape (core/matrix_shape.py)."""
    return matrix_shape.read_toml(root / name)


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    package: str
    phase: str
    backward: bool
    module: str
    torch_fallback: str


@dataclass(frozen=True)
class PackageInfo:
    name: str  # import name
    title: str
    distributions: tuple[str, ...]
    install_distribution: str
    probe_modules: tuple[str, ...]
    devices: tuple[str, ...]
    kind: str
    needs: tuple[str, ...] = ()
    extension: str = ""
    release_wheel: str = ""
    env_prefix: str = ""
    reference: str = ""
    skip_reason: str = ""  # why the other distributions in `distributions` are not installed
    # variables a source build sets beyond {env_prefix}_FORCE_BUILD (mamba-ssm: MAMBA_KEEP_CUDA_BUILD), as pairs
    build_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ModelType:
    name: str
    family: str
    module: str
    functions: tuple[str, ...]
    layer: str = ""
    text_model_type: str = ""
    since: str = ""  # the first transformers release that has this model_type
    earlier: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (before, family, functions) of older releases

    def at(self, transformers_version: str | None) -> ModelType:
        """This type as that transformers release builds it (an `earlier` family before `before`; else itself)."""
        earlier = model_history.family_at(self.earlier, transformers_version)
        return self if earlier is None else replace(self, family=earlier[0], functions=earlier[1], earlier=())


@dataclass(frozen=True)
class Alias:
    name: str
    id: str
    config: str = ""
    model_type: str = ""
    reference: str = ""


@dataclass(frozen=True)
class Breakage:
    id: str
    title: str
    severity: Severity
    functions: tuple[str, ...]
    when: dict[str, Any]
    message: str
    fix: str
    reference: str
    remedies: tuple[dict[str, str], ...] = ()  # fixes `install` can offer: {package, spec, kind, why}


@dataclass(frozen=True)
class ImportErrorRule:
    id: str
    pattern: str
    title: str
    message: str
    fix: str
    reference: str


@dataclass(frozen=True)
class Matrix:
    functions: dict[str, FunctionInfo]
    packages: dict[str, PackageInfo]
    families: dict[str, dict[str, Any]]
    model_types: dict[str, ModelType]
    aliases: dict[str, Alias]
    attention: dict[str, str]
    breakages: tuple[Breakage, ...]
    import_errors: tuple[ImportErrorRule, ...]
    transformers: dict[str, Any]
    root: Path = field(compare=False, repr=False)  # the folder it was read from (folder()): its configs, tables
    verified: tuple[dict[str, Any], ...] = field(default=())
    runtime_errors: tuple[ImportErrorRule, ...] = field(default=())  # exceptions a live run raises, by pattern
    _tables: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, compare=False, repr=False)

    @functools.cached_property
    def signatures(self) -> TraceSignatures:
        """The same folder's signatures.toml (trace, verify's evidence), read on first use (a command may read none)."""
        return _load_signatures(self.root)

    def table(self, name: str) -> dict[str, Any]:
        """One file of the same folder as plain data ("verify.toml"): read and shape-checked on first use, then kept
        with this matrix; each caller gets its own copy (a caller that changes it changes no other's)."""
        if name not in self._tables:
            self._tables[name] = _load(name, self.root)
        return copy.deepcopy(self._tables[name])

    @property
    def version_keys(self) -> tuple[str, ...]:
        """The version conditions breakages.toml's `when` may name: the stack's, then one per package."""
        return (*STACK_KEYS, *self.packages)

    def shipped_config(self, relpath: str) -> dict[str, Any]:
        return matrix_shape.read_config(self.root / relpath)

    def package_of_distribution(self, dist: str) -> PackageInfo | None:
        norm = dist.lower().replace("_", "-")
        for pkg in self.packages.values():
            if norm in pkg.distributions:
                return pkg
        return None


def load() -> Matrix:
    """Load and type-check all matrix files, once per process and folder (folder()): core/entry.py `matrix()` alone
    asks (a command's Context, a child process's entry point); everything else is passed the matrix."""
    return _load_matrix(folder())


@functools.lru_cache(maxsize=2)
@matrix_shape.typed("models.toml")
def _load_matrix(root: Path) -> Matrix:
    pkgs = packages_from(_load("packages.toml", root), root / "packages.toml")
    funcs = functions_from(_load("functions.toml", root), root / "functions.toml", frozenset(pkgs))
    models = _load("models.toml", root)
    families = models["families"]
    mtypes = {}
    for n, d in models["model_types"].items():
        if d.get("family") not in families:
            raise _bad(root / "models.toml", f"[model_types.{n}]", f"family: {d.get('family')!r} is not a "
                       "[families.*] table of models.toml")
        fam = families[d["family"]]
        mtypes[n] = ModelType(
            name=n, family=d["family"], module=d["module"], functions=tuple(fam["functions"]),
            layer=d.get("layer", ""), text_model_type=d.get("text_model_type", ""), since=d.get("since", ""),
            earlier=model_history.earlier_from(d.get("earlier", []), families, functools.partial(
                _bad, root / "models.toml", f"[model_types.{n}] earlier")),
        )
    aliases = {n.lower(): Alias(name=n, **d) for n, d in models["aliases"].items()}
    attention = {n: d["package"] for n, d in models["attention"].items()}
    breakages, import_errors, runtime_errors = breakages_from(_load("breakages.toml", root), root / "breakages.toml",
                                                              frozenset(funcs), frozenset(pkgs))
    verified_path = root / "verified.toml"
    verified = tuple(_load("verified.toml", root).get("verified", [])) if verified_path.exists() else ()
    m = Matrix(
        functions=funcs, packages=pkgs, families=families, model_types=mtypes, aliases=aliases,
        attention=attention, breakages=breakages, import_errors=import_errors,
        transformers=_load("transformers.toml", root), root=root, verified=verified, runtime_errors=runtime_errors,
    )
    _validate(m, root / "models.toml")
    return m


def _validate(m: Matrix, source: Path) -> None:
    for mt in m.model_types.values():
        for f in mt.functions:
            if f not in m.functions:
                raise _bad(source, f"[families.{mt.family}] functions", f"{f}: not in functions.toml")
    for a in m.aliases.values():
        if not a.config and a.model_type not in m.model_types:
            raise _bad(source, f'[aliases."{a.name}"]', "has neither config nor a model_type of [model_types]")
    for impl, pkg in m.attention.items():
        if pkg and pkg not in m.packages:
            raise _bad(source, f"[attention.{impl}] package", f"'{pkg}' is not a table of packages.toml")


# --- packages.toml and functions.toml, validated as they are read: the key names a package's version in
# breakages.toml `when` (beside the stack's own STACK_KEYS), so it is an import name no condition uses ---

STACK_KEYS = ("torch", "triton", "transformers", "nvcc", "kernels")  # Environment.version_of's fixed names
_PACKAGE_TEXT = ("title", "install_distribution", "kind")
_PACKAGE_LISTS = ("distributions", "probe_modules", "devices")
_PACKAGE_OPTIONAL = {"needs": list, "extension": str, "release_wheel": str, "env_prefix": str, "reference": str,
                     "skip_reason": str, "build_env": dict}
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
_IMPORT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FUNCTION_KEYS = {"package": str, "phase": str, "backward": bool, "module": str, "torch_fallback": str}
_PHASES = ("prefill", "decode")


def _strings(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, str) and x for x in v)


def _package_problem(name: str, d: Any) -> tuple[str, str] | None:
    """(the key, what is wrong with it) for one [package] table of packages.toml, or None."""
    if not _IMPORT_NAME.match(name):
        return "", "the table's name is the package's import name (letters, digits, _)"
    if name in STACK_KEYS or name in _CONDITIONS:
        return "", f"'{name}' is already a condition of breakages.toml `when`; a package needs its own import name"
    if not isinstance(d, dict):
        return "", "not a table"
    for key in _PACKAGE_TEXT:
        if not isinstance(d.get(key), str) or not d[key]:
            return key, "missing, or not a non-empty string"
    for key in _PACKAGE_LISTS:
        if not _strings(d.get(key)):
            return key, "missing, or not a non-empty list of strings"
    if d["install_distribution"] not in d["distributions"]:
        return "install_distribution", f"'{d['install_distribution']}' is not one of its distributions"
    return _optional_problem(d)


def _optional_problem(d: dict[str, Any]) -> tuple[str, str] | None:
    for key, v in d.items():
        if key in (*_PACKAGE_TEXT, *_PACKAGE_LISTS):
            continue
        if key not in _PACKAGE_OPTIONAL:
            known = ", ".join((*_PACKAGE_TEXT, *_PACKAGE_LISTS, *_PACKAGE_OPTIONAL))
            return key, f"not a key kernelcheck knows (known: {known})"
        if _PACKAGE_OPTIONAL[key] is dict:
            if not _env_table(v):
                return key, "must be a table of environment variables (NAME_IN_CAPITALS = \"value\")"
        elif not (_strings(v) if _PACKAGE_OPTIONAL[key] is list else isinstance(v, str)):
            return key, f"must be {'a list of strings' if _PACKAGE_OPTIONAL[key] is list else 'a string'}"
    return None


def _env_table(v: Any) -> bool:
    return isinstance(v, dict) and all(_ENV_NAME.match(k) and isinstance(x, str) for k, x in v.items())


def packages_from(table: dict[str, Any], source: Path) -> dict[str, PackageInfo]:
    """packages.toml's tables, typed; raises BadInput naming `source` and the key of the first bad entry."""
    out = {}
    for name, d in table.items():
        if (problem := _package_problem(name, d)) is not None:
            raise _bad(source, f"[{name}] {problem[0]}".rstrip(), problem[1])
        typed: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else tuple(v.items()) if isinstance(v, dict)
                                 else v for k, v in d.items()}
        out[name] = PackageInfo(name=name, **typed)
    return out


def functions_from(table: dict[str, Any], source: Path, packages: frozenset[str]) -> dict[str, FunctionInfo]:
    """functions.toml's tables, typed; BadInput naming `source` and the key of the first bad entry (`packages`:
    the tables of packages.toml)."""
    out = {}
    for name, d in table.items():
        if not isinstance(d, dict) or set(d) != set(_FUNCTION_KEYS):
            raise _bad(source, f"[{name}]", f"needs exactly the keys {', '.join(_FUNCTION_KEYS)}")
        for key, kind in _FUNCTION_KEYS.items():
            if not isinstance(d[key], kind):
                raise _bad(source, f"[{name}] {key}", f"must be {'true or false' if kind is bool else 'a string'}")
        if d["package"] not in packages:
            raise _bad(source, f"[{name}] package", f"'{d['package']}' is not a table of packages.toml")
        if d["phase"] not in _PHASES:
            raise _bad(source, f"[{name}] phase", f"'{d['phase']}' is none of {', '.join(_PHASES)}")
        out[name] = FunctionInfo(name=name, **d)
    return out


# --- breakages.toml, validated as it is read: a bad entry is bad input naming the file and the key ---

CAPABILITY_KEYS = ("gpu_capability", "gpu_capability_min", "gpu_capability_max")
_LIST_KEYS = ("gpu_capability", "absent", "bound", "used", "requirement_unmet", "fla_backend")
# the conditions other than versions; a version key is one of STACK_KEYS or a table name of packages.toml
_CONDITIONS = frozenset((*CAPABILITY_KEYS, *_LIST_KEYS, "mode", "cuda_gpu", "built_nvcc"))
_BREAKAGE_TEXT = ("id", "title", "severity", "message", "fix", "reference")
_SEVERITIES = ("broken", "fallback", "warning")
_REMEDY_KINDS = ("add", "change", "image")
_PATTERN_KEYS = ("id", "pattern", "title", "message", "fix", "reference")


def _bad(source: Path, where: str, what: str) -> BadInput:
    return BadInput(f"{source}: {where}: {what}. Fix that entry (the file's header says what each key holds).")


def _condition_problem(key: str, want: Any, versions: frozenset[str]) -> str | None:
    """What is wrong with one `when` condition, or None (`versions`: the version keys, STACK_KEYS and packages)."""
    if key not in _CONDITIONS and key not in versions:
        known = ", ".join(sorted(_CONDITIONS | versions))
        return f"'{key}' is not a condition kernelcheck knows (known: {known}; a package's version key is its " \
               "table name in packages.toml)"
    if key in _LIST_KEYS and not (isinstance(want, list) and all(isinstance(w, str) for w in want)):
        return f"'{key}' must be a list of strings, not {json.dumps(want)[:60]}"
    if key in ("cuda_gpu",) and not isinstance(want, bool):
        return f"'{key}' must be true or false, not {json.dumps(want)[:60]}"
    if (key in versions or key in ("built_nvcc", "gpu_capability_min", "gpu_capability_max", "mode")) \
            and not isinstance(want, str):
        return f"'{key}' must be a string, not {json.dumps(want)[:60]}"
    if key in versions or key == "built_nvcc":
        try:
            SpecifierSet(want)
        except InvalidSpecifier:
            return f"'{key}' = {json.dumps(want)} is not a version specifier (e.g. \">=3.4.0,<3.7.1\")"
    return None


def _breakage_problem(b: dict[str, Any], functions: frozenset[str],
                      versions: frozenset[str]) -> tuple[str, str] | None:
    """(the key, what is wrong with it) for one [[breakage]] table, or None."""
    for key in _BREAKAGE_TEXT:
        if not isinstance(b.get(key), str) or not b[key]:
            return key, "missing, or not a non-empty string"
    if b["severity"] not in _SEVERITIES:
        return "severity", f"'{b['severity']}' is none of {', '.join(_SEVERITIES)}"
    fns = b.get("functions")
    if not isinstance(fns, list) or not all(isinstance(f, str) for f in fns):
        return "functions", "missing, or not a list of function names"
    if unknown := [f for f in fns if f not in functions]:
        return "functions", f"{', '.join(unknown)}: not in functions.toml"
    if not isinstance(b.get("when"), dict):
        return "when", "missing, or not a table of conditions"
    for key, want in b["when"].items():
        if (problem := _condition_problem(key, want, versions)) is not None:
            return f"when.{key}", problem
    if unknown := [f for f in b["when"].get("used", ()) if f not in functions]:
        return "when.used", f"{', '.join(unknown)}: not in functions.toml"
    return _remedy_problem(b.get("remedies", []))


def _remedy_problem(remedies: Any) -> tuple[str, str] | None:
    if not isinstance(remedies, list):
        return "remedies", "not a list of tables"
    for i, r in enumerate(remedies):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("package", "spec", "kind")):
            return f"remedies[{i}]", "each remedy is a table with package, spec and kind strings"
        if r["kind"] not in _REMEDY_KINDS:
            return f"remedies[{i}].kind", f"'{r['kind']}' is none of {', '.join(_REMEDY_KINDS)}"
    return None


def _pattern_rule(r: Any, source: Path, where: str) -> ImportErrorRule:
    if not isinstance(r, dict) or set(r) != set(_PATTERN_KEYS) or not all(isinstance(v, str) for v in r.values()):
        raise _bad(source, where, f"needs exactly the string keys {', '.join(_PATTERN_KEYS)}")
    try:
        re.compile(r["pattern"])
    except re.error as exc:
        raise _bad(source, f"{where}.pattern", f"not a regular expression ({exc})") from None
    return ImportErrorRule(**r)


def breakages_from(table: dict[str, Any], source: Path, functions: frozenset[str], packages: frozenset[str],
                   ) -> tuple[tuple[Breakage, ...], tuple[ImportErrorRule, ...], tuple[ImportErrorRule, ...]]:
    """breakages.toml's [[breakage]], [[import_error]] and [[runtime_error]] tables, typed; raises BadInput naming
    `source` and the key of the first bad entry (`functions`: the names functions.toml defines; `packages`: the
    tables of packages.toml, whose names are version keys beside STACK_KEYS)."""
    versions = frozenset((*STACK_KEYS, *packages))
    out, seen = [], set()
    for i, b in enumerate(table.get("breakage", [])):
        where = f"[[breakage]] {i + 1}" + (f" (id {json.dumps(b.get('id'))})" if isinstance(b, dict) else "")
        problem = _breakage_problem(b, functions, versions) if isinstance(b, dict) else ("", "not a table")
        if problem is None and b["id"] in seen:
            problem = ("id", "used by an earlier [[breakage]]; ids are unique")
        if problem is not None:
            raise _bad(source, f"{where} {problem[0]}".rstrip(), problem[1])
        seen.add(b["id"])
        out.append(Breakage(id=b["id"], title=b["title"], severity=Severity(b["severity"]),
                            functions=tuple(b["functions"]),
                            when=dict(b["when"]), message=b["message"], fix=b["fix"], reference=b["reference"],
                            remedies=tuple(dict(r) for r in b.get("remedies", []))))
    kinds = [tuple(_pattern_rule(r, source, f"[[{kind}]] {i + 1}") for i, r in enumerate(table.get(kind, [])))
             for kind in ("import_error", "runtime_error")]
    return tuple(out), kinds[0], kinds[1]

# --- trace signatures (matrix/signatures.toml): what fast and fallback paths look like in a profiler trace ---

@dataclass(frozen=True)
class KernelGroup:
    """`min` kernels (per step) whose names match any of `patterns` (fnmatch globs)."""

    what: str
    patterns: tuple[str, ...]
    min: int


@dataclass(frozen=True)
class Signature:
    """The torch reference path of a package's functions, as seen in a trace."""

    id: str
    package: str  # key in packages.toml
    functions: tuple[str, ...]
    title: str
    what: str
    kernels: tuple[KernelGroup, ...]
    python_functions: tuple[str, ...] = ()
    context_packages: tuple[str, ...] = ()
    reference: str = ""


@dataclass(frozen=True)
class LaunchBound:
    busy_fraction_below: float
    min_kernels: int
    median_kernel_us_below: float
    launch_delay_p50_below_us: float
    reference: str = ""


@dataclass(frozen=True)
class TraceSignatures:
    fast_kernels: dict[str, tuple[str, ...]]  # package key -> fast kernel name patterns
    fast_references: dict[str, str]
    fast_examples: dict[str, tuple[str, ...]]  # kernel names a user should see once the package is used
    signatures: tuple[Signature, ...]
    launch_bound: LaunchBound
    backends: dict[str, tuple[str, ...]] = field(default_factory=dict)  # fla backend -> its kernel name patterns


@functools.lru_cache(maxsize=2)
@matrix_shape.typed("signatures.toml")
def _load_signatures(root: Path) -> TraceSignatures:
    """`root`'s signatures.toml (kernel name patterns and thresholds used by `kernelcheck trace`): Matrix.signatures."""
    d = _load("signatures.toml", root)
    pk = d.get("package", {})
    sigs = tuple(
        Signature(
            id=s["id"], package=s["package"], functions=tuple(s.get("functions", ())), title=s["title"],
            what=s.get("what", ""),
            kernels=tuple(KernelGroup(what=k.get("what", ""), patterns=tuple(k["patterns"]), min=int(k["min"]))
                          for k in s.get("kernels", ())),
            python_functions=tuple(s.get("python_functions", ())),
            context_packages=tuple(s.get("context_packages", ())), reference=s.get("reference", ""),
        )
        for s in d.get("signature", ())
    )
    out = TraceSignatures(
        fast_kernels={n: tuple(p["fast_kernels"]) for n, p in pk.items()},
        fast_references={n: p.get("reference", "") for n, p in pk.items()},
        fast_examples={n: tuple(p.get("examples", ())) for n, p in pk.items()},
        signatures=sigs,
        launch_bound=LaunchBound(**d["launch_bound"]),
        backends={n: tuple(b["kernels"]) for n, b in d.get("backend", {}).items()},
    )
    known = _load_matrix(root).packages  # the matrix of the same folder
    for s in sigs:
        for name in (s.package, *s.context_packages):
            if name not in known or name not in out.fast_kernels:
                raise _bad(root / "signatures.toml", f"[[signature]] {s.id}", f"names package {name}, which is "
                           "missing from packages.toml or from signatures.toml [package.*]")
    return out
