"""The cache proof (`doctor --cache-dir DIR`, `verify --cache-dir DIR`): per JIT, whether this node would hit the
cache `kernelcheck warm` baked into DIR, and what a miss costs, from the keys, before anything compiles.

DIR holds warm's manifest (`kernelcheck-cache.json`: the key parts each JIT's cache was written under, what each JIT
compiled and the seconds it took, and whether a fresh process hit it). The node's own parts are read in a child
process with the job's variables pointed at DIR (integrations/jit_caches.py `keys_in_child`); `compare` (pure) turns
the two into findings: a hit, a miss naming each part that differs ("ptxas 12.8 baked, 13.0 here"), a node part
no key holds (the driver), a part that cannot be read here (undecided), and variables that would not find DIR.
TileLang's key depends on the process's build history (tilelang#2662), so equal parts are a hit only where warm
measured one in a fresh process.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Finding, Severity
from kernelcheck.integrations import jit_caches

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix
    from kernelcheck.report.model import Report

MANIFEST = "kernelcheck-cache.json"
FORMAT = 1
TABLE = "jit_caches.toml"


@dataclass
class Manifest:
    """What `kernelcheck warm` wrote into DIR."""

    model: str
    mode: str
    shapes: list[str]
    tokens: dict[str, int]
    compile: bool
    keys: dict[str, Any]  # integrations/jit_caches.py read_keys() in the process that compiled
    compiled: dict[str, dict[str, Any]]  # jit -> {"entries", "bytes", "seconds"} the warm run added
    timing: dict[str, Any] = field(default_factory=dict)  # per shape: cold_s, warm_s; recheck_s
    recheck: dict[str, dict[str, Any]] = field(default_factory=dict)  # jit -> {"entries_added"}: a fresh process
    variables: dict[str, str] = field(default_factory=dict)  # variable -> subfolder of DIR
    created: str = ""
    format: int = FORMAT
    kernelcheck: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Manifest:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def write(cache_dir: str, manifest: Manifest) -> Path:
    """Write the manifest into `cache_dir` (atomically); its path."""
    path = Path(cache_dir) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    if not manifest.created:
        manifest.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    tmp = path.with_name(f".{MANIFEST}.{os.getpid()}")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read(cache_dir: str) -> Manifest:
    """DIR's manifest; BadInput (exit 2) naming what is wrong when DIR is no warmed cache."""
    path = Path(cache_dir) / MANIFEST
    if not Path(cache_dir).is_dir():
        raise BadInput(f"--cache-dir {cache_dir}: no such folder. Point it at the folder `kernelcheck warm "
                       "--cache-dir DIR` wrote (the baked cache, as the job will see it).")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"--cache-dir {cache_dir} holds no {MANIFEST}: it was not written by `kernelcheck warm`, so "
                       "the keys its entries were compiled under are unknown. Warm it with `kernelcheck warm --model "
                       f"M --mode train --cache-dir {cache_dir}` on a GPU node like the job's.") from None
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path} cannot be read as JSON ({type(exc).__name__}: {exc}); warm the folder again with "
                       "`kernelcheck warm`.") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("keys"), dict):
        raise BadInput(f"{path} is not a kernelcheck cache manifest of format {FORMAT}; warm the folder again with "
                       "this kernelcheck's `kernelcheck warm`.")
    try:
        return Manifest.from_json(data)
    except TypeError as exc:
        raise BadInput(f"{path} lacks a field of the manifest ({exc}); warm the folder again with "
                       "`kernelcheck warm`.") from None


def env_lines(cache_dir: str, manifest: Manifest | None, table: Mapping[str, Any], with_compile: bool) -> list[str]:
    """`VAR=/abs/folder` lines that point the job's JITs at `cache_dir` (its variables, the manifest's where read)."""
    root = os.path.abspath(cache_dir)
    if manifest is not None and manifest.variables:  # a folder warmed before KERNELCHECK_PROOF_DIR: its proofs there
        return [f"{jit_caches.OWN[0] if var == 'KERNELCHECK_HOME' else var}={os.path.join(root, sub)}"
                for var, sub in manifest.variables.items()]
    return [f"{k}={v}" for k, v in jit_caches.env_for(root, table, with_compile).items()]


# -- the comparison -------------------------------------------------------------------------------------------------
def _show(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in sorted(v.items())) or "none set"
    return "absent" if v is None else str(v)


def _differs(part: str, baked: Any, here: Any) -> str | None:
    """How `part` differs ("ptxas 12.8 baked, 13.0 here"), None when equal. For a dict (the sources, the variables)
    only the entries that differ are named."""
    if baked == here:
        return None
    if isinstance(baked, dict) and isinstance(here, dict):
        names = sorted({*baked, *here})
        diffs = [f"{n} {_show(baked.get(n))} baked, {_show(here.get(n))} here" for n in names
                 if baked.get(n) != here.get(n)]
        return "; ".join(diffs)
    return f"{_show(baked)} baked, {_show(here)} here"


def _cost(manifest: Manifest, jit: str) -> str:
    done = manifest.compiled.get(jit, {})
    secs = done.get("seconds")
    n = done.get("entries", 0)
    cold = sum(float(t.get("cold_s", 0.0)) for t in manifest.timing.get("shapes", {}).values())
    spent = f"{secs:.1f} s in its compiler" if isinstance(secs, int | float) and secs else "time not attributed"
    return f"{n} cache entries, {spent} at warm time (the whole cold pass: {cold:.1f} s)"


def compare(manifest: Manifest, here: Mapping[str, Any], table: Mapping[str, Any]) -> list[Finding]:
    """The proof's findings for the JITs that compiled something into the baked cache (pure)."""
    if "error" in here:
        return [Finding("jit-cache-undecided", Severity.WARNING,
                        f"the key parts of this node could not be read ({here['error']}), so whether it hits the "
                        "baked cache is undecided.", "run the check again; if it persists, run verify (it compiles "
                        "what misses and says so)", None)]
    lays = jit_caches.layouts(table)
    names: dict[str, str] = dict(table.get("part", {}))
    out = [f for jit, done in manifest.compiled.items() if jit in lays and done.get("entries")
           for f in [_one(manifest, lays[jit], here.get(jit, {}), names)]]
    if not out:
        device = manifest.keys.get("node", {}).get("gpu") or "no GPU"
        out.append(Finding("jit-cache-undecided", Severity.WARNING,
                           f"the baked cache holds no compiled kernel (warm ran on {device}): there is nothing to hit, "
                           "and the job compiles at its first call.",
                           "warm on a GPU node of the job's kind: kernelcheck warm --model "
                           f"{manifest.model} --mode {manifest.mode} --cache-dir DIR", None))
    return out + _node(manifest, here, table)


def _one(manifest: Manifest, lay: jit_caches.Layout, mine: Mapping[str, Any], names: Mapping[str, str]) -> Finding:
    """One JIT's finding: undecided (not here, key unreadable, a part unread, TileLang's hit unmeasured), a miss
    naming each part that differs, or a hit with the cost a miss would have."""
    jit = lay.jit
    done, baked = manifest.compiled[jit], manifest.keys.get(jit, {})
    if "absent" in mine:
        return Finding("jit-cache-undecided", Severity.WARNING,
                       f"{lay.title} compiled {done.get('entries')} cache entries at warm time but is not usable here "
                       f"({mine['absent']}): its baked entries cannot be used.", None, lay.reference)
    layout = mine.get("layout") or baked.get("layout")
    if layout:
        return Finding("jit-cache-undecided", Severity.WARNING,
                       f"{lay.title}'s cache key could not be read: {layout}. Whether this node hits the baked cache "
                       "is undecided.", "run verify here: it compiles what misses and says so", lay.reference)
    diffs = [(p, d) for p in lay.key if mine.get(p) is not None
             and (d := _differs(p, baked.get(p), mine.get(p))) is not None]
    if diffs:
        named = "; ".join(f"{names.get(p, p)}: {d}" for p, d in diffs)
        return Finding(
            "jit-cache-miss", Severity.WARNING,
            f"{lay.title} would miss the baked cache here, its key differs in {named}. A miss compiles again what "
            f"warm compiled ({_cost(manifest, jit)}).",
            "warm the cache on a node like this one (same GPU arch and packages): kernelcheck warm --model "
            f"{manifest.model} --mode {manifest.mode} --cache-dir DIR", lay.reference)
    unread = [p for p in lay.key if mine.get(p) is None and baked.get(p) is not None]
    if unread:
        return Finding(
            "jit-cache-undecided", Severity.WARNING,
            f"{lay.title}'s key parts match the baked cache but {', '.join(names.get(p, p) for p in unread)} cannot "
            "be read here (no GPU visible?), so a hit is undecided.",
            "run the proof on the GPU node (doctor --cache-dir there, or verify --cache-dir)", lay.reference)
    if lay.unstable:
        measured = manifest.recheck.get(jit, manifest.recheck.get("tilelang" if jit == "flash_qla" else jit))
        if measured is None or measured.get("entries_added", 1) != 0:
            again = "was not measured" if measured is None else (
                f"was not there: a fresh process compiled {measured.get('entries_added')} entries again at warm time")
            return Finding(
                "jit-cache-undecided", Severity.WARNING,
                f"{lay.title}'s key parts match the baked cache, but its key also depends on the process's own build "
                f"history, and a hit {again}; a miss costs {_cost(manifest, jit)}.",
                "measure it: run verify --cache-dir DIR on this node and read its cache line", lay.unstable)
    equal = ", ".join(f"{names.get(p, p)} {_show(mine.get(p))}" for p in lay.key if p != "sources")
    return Finding(
        "jit-cache-hit", Severity.INFO,
        f"{lay.title} would hit the baked cache here (key parts equal: {equal}"
        f"{'; a fresh process hit it at warm time' if lay.unstable else ''}); a miss would cost "
        f"{_cost(manifest, jit)}.", None, lay.reference)


def _node(manifest: Manifest, here: Mapping[str, Any], table: Mapping[str, Any]) -> list[Finding]:
    """The node's parts no JIT key holds (the driver): a difference is said, never a miss."""
    out = []
    baked_node, mine_node = manifest.keys.get("node", {}), here.get("node", {})
    for part, title in dict(table.get("node", {})).items():
        d = _differs(part, baked_node.get(part), mine_node.get(part))
        if d is not None and mine_node.get(part) is not None:
            out.append(Finding(
                "jit-cache-node-differs", Severity.WARNING,
                f"{title}: {d}. No JIT's cache key holds it, so this is no miss; but the kernels were compiled on the "
                f"other {title.lower()}, and one older than the CUDA they were built for may refuse to load them.",
                "run verify --cache-dir DIR here: it runs the baked kernels", None))
    return out


def not_found(cache_dir: str, manifest: Manifest, environ: Mapping[str, str],
              table: Mapping[str, Any]) -> list[Finding]:
    """The variables of this process that would not lead the JITs to `cache_dir` (pure)."""
    want = dict(line.split("=", 1) for line in env_lines(cache_dir, manifest, table, manifest.compile))
    wrong = {v: p for v, p in want.items() if v not in environ or os.path.abspath(environ[v]) != p}
    if not wrong:
        return []
    said = "; ".join(f"{v} is {environ[v]!r}" if v in environ else f"{v} is unset" for v in wrong)
    jits = [v for v in wrong if v != jit_caches.OWN[0]]
    then = ("The JITs then compile into their default folders (the cold cost on every node)" if jits else "")
    if jit_caches.OWN[0] in wrong:
        then += ("; and " if then else "The gate then ") + "proves again what warm proved there (its import proofs " \
            "and JIT probes)"
    return [Finding("jit-cache-not-found", Severity.WARNING,
                    f"this process would not find the baked cache in {cache_dir}: {said}. {then}.",
                    "set in the job's environment: " + "  ".join(f"{v}={p}" for v, p in want.items()), None)]


def attach(report: Report, cache_dir: str, *, m: Matrix, environ: Mapping[str, str] | None = None) -> None:
    """Add the proof for `cache_dir` to `report`: the node's keys read in a child process whose environment points
    the JITs at DIR (the job's), compared with the manifest; and this process's variables (the job's?) checked."""
    manifest = read(cache_dir)
    table = m.table(TABLE)
    env = dict(os.environ if environ is None else environ)
    view = report.environment
    gpus = view.gpus if view is not None else ()
    arch = gpus[0].capability.sm if gpus else None
    child_env = {**env, **dict(line.split("=", 1) for line in env_lines(cache_dir, manifest, table,
                                                                          manifest.compile))}
    here = jit_caches.keys_in_child(child_env, arch)
    report.findings.extend(compare(manifest, here, table))
    report.findings.extend(not_found(cache_dir, manifest, env, table))
