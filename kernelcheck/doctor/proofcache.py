"""A cache of doctor's import proofs, so that a second doctor in an unchanged environment imports nothing.

The import children (doctor/imports.py) answer questions only an import can answer: does fla import, what
does transformers take for each decorated function, does `fla.ops...` have the function. On this box that is
~8 s of `import fla.ops` (torch._dynamo). The answers depend only on the files Python would import and on
the process's environment, so they are stored after a complete, successful proof and reused while none of
those inputs changed.

The key (`fingerprint`) is everything that can change an answer:
  - kernelcheck itself (version, and the size+mtime of every file of the package and of matrix/);
  - the interpreter: sys.executable, sys.version, the sys.path entries in order, and the names in each entry
    (a package added or removed anywhere on the path changes it); the first entry, the script's folder or the
    current folder Python puts there, by what can be imported from it (see below), not by its path;
  - torch, transformers and kernels: version, location, the size+mtime of their dist-info RECORD and their package
    folder's listing;
  - every kernel package of the matrix that is installed, what its distributions require (one level; torch,
    transformers and kernels excepted: above) and what the matrix says it needs (triton): version, RECORD
    size+mtime, and size+mtime of every file and the names in every folder of its import packages (a file
    touched or edited, one added, a reinstall: all change the key; __pycache__ is left out, Python writes it);
    every other distribution's version is in the sys.path listing (its dist-info folder's name);
  - the environment variables an import or a dispatch can read (CUDA_*, TORCH*, TRITON_*, FLA_*,
    TRANSFORMERS_*, HF_*, USE_HUB_KERNELS, LOCAL_KERNELS, LD_*, PYTHON*, KERNELCHECK_*, PATH, CC, ...), values
    and all: the JIT cache folders `kernelcheck warm --print-env` names are the same on every node of an image;
  - the machine: the NVIDIA driver (/proc/driver/nvidia/version) and the /dev/nvidia* devices;
  - the query and the number of children; and the plan of steps itself, compared in full when the steps are
    known (`matches`).

Left out, because they cannot change an answer, so that a proof made when an image was built (`kernelcheck warm`)
holds on every node that runs the image, wherever the job starts and whoever runs it:
  - the host name: no import, dispatch or probe reads it (the driver and the devices, which can differ between
    nodes, stay in the key);
  - HOME's path: what an import can get from HOME is the user's site-packages folder, which is on sys.path when
    it exists (keyed there, path and listing), and default cache folders a package may create under it, which
    fail only where HOME cannot be written: the key holds whether HOME is set, exists and is writable;
  - the current folder's path: an import sees the current folder only through sys.path (Python's first entry
    under `python -m`, an empty entry under `-c`, a relative PYTHONPATH entry), keyed by the names that can be
    imported from it (folders, .py, .pyc and extension modules, with the size+mtime of each) - the same names in
    another folder import the same way as far as the key can tell, as a file edited in place of the same size and
    mtime already did; the model a relative --model path names is compared in the plan of steps;
  - KERNELCHECK_HOME and KERNELCHECK_PROOF_DIR: where proofs are kept, not what they say;
    KERNELCHECK_IMPORT_CACHE and KERNELCHECK_IMPORT_TIMEOUT choose, not change, the answer.

Only complete runs are stored: every child exited 0 with every answer, and no answer is a failure (a
package that does not import, a module error, an attribute check that raised). A failure is proven again on
every run, so a fix shows at once; a cached success is only reused while the files it came from are the
same. What is not in the key: edits inside torch's or transformers' own files that leave RECORD, the
version and the folder listing alone (editing site-packages/transformers/... in place); `--no-cache`
(KERNELCHECK_IMPORT_CACHE=0) and `--exact` always prove afresh.

Files: $KERNELCHECK_HOME/import-proofs/<key>.json (default ~/.cache/kernelcheck/import-proofs), one per key,
written atomically, the KEEP newest kept; an unreadable, corrupt or unwritable file is a miss, never an error.
Then, read only, $KERNELCHECK_PROOF_DIR/import-proofs/<key>.json: the proofs `kernelcheck warm --cache-dir DIR`
made into DIR/kernelcheck when the image was built, under the variables `warm --print-env` prints; a proof found
there is reported as made at bake time (`import_proof.cache` "baked", with when), not proven on this node. A key
that is not there is a miss: proven here, and stored in KERNELCHECK_HOME.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelcheck.core import matrix, settings
from kernelcheck.doctor import proofdirs

log = logging.getLogger(__name__)

FORMAT = 2  # 2: portable keys (no host, HOME or current folder path); KERNELCHECK_PROOF_DIR
# variables an import or transformers' dispatch can read (dispatch: core/environment.py DISPATCH_*)
# (and each package's env_prefix of matrix/packages.toml: MAMBA, CAUSAL_CONV1D, FLASH_ATTN)
ENV_PREFIXES = ("CUDA", "NVIDIA", "TORCH", "PYTORCH", "TRITON", "FLA_", "TILELANG", "TVM", "TRANSFORMERS",
                "HF_", "KERNELCHECK_", "PYTHON", "LD_", "UNSLOTH", "XDG_", "OMP_", "MKL_")
ENV_NAMES = ("USE_HUB_KERNELS", "LOCAL_KERNELS", "PATH", "CC", "CXX")  # HOME: `_home`, what it can change
# they choose, or say where proofs are kept, not what an answer is
ENV_IGNORED = ("KERNELCHECK_IMPORT_CACHE", "KERNELCHECK_IMPORT_TIMEOUT", "KERNELCHECK_HOME", "KERNELCHECK_PROOF_DIR")
_SKIP_DEPS = ("torch", "transformers", "kernels")  # large trees / many requirements: version, RECORD, listing
_MAX_FILES = 50_000
KEEP = 64  # proofs kept (newest first); older ones are removed when a new one is stored


def enabled() -> bool:
    """False with KERNELCHECK_IMPORT_CACHE=0 (`doctor --no-cache` passes its choice to ImportProbe.start)."""
    return settings.is_on(settings.variable("KERNELCHECK_IMPORT_CACHE"), True)


SUBFOLDER = "import-proofs"


def folder() -> Path:
    return proofdirs.home(SUBFOLDER)


def baked_folder() -> Path | None:
    """KERNELCHECK_PROOF_DIR/import-proofs: proofs made when the image was built (read only), or None."""
    return proofdirs.baked(SUBFOLDER)


# ---------------------------------------------------------------------------------------------------------------
# the key
# ---------------------------------------------------------------------------------------------------------------


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _listing(path: str) -> list[str] | None:
    try:
        return sorted(n for n in os.listdir(path) if n != "__pycache__")
    except OSError:
        return None


def _tree(path: str, h: Any, budget: list[int]) -> None:
    """Names, sizes and mtimes of everything under `path` (not __pycache__) into the hash `h`."""
    stack = [path]
    while stack and budget[0] > 0:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            h.update(f"?{d}\n".encode())
            continue
        for e in entries:
            if e.name == "__pycache__":
                continue
            budget[0] -= 1
            try:
                if e.is_dir(follow_symlinks=True):
                    h.update(f"d {e.path}\n".encode())
                    stack.append(e.path)
                else:
                    st = e.stat()
                    h.update(f"f {e.path} {st.st_size} {st.st_mtime_ns}\n".encode())
            except OSError:
                h.update(f"? {e.path}\n".encode())


def _dist_path(dist: md.Distribution) -> Path | None:
    p = getattr(dist, "_path", None)
    return Path(p) if p is not None else None


def _roots(dist: md.Distribution) -> list[str]:
    """The top-level import packages / modules a distribution installed (from RECORD, else top_level.txt)."""
    base = _dist_path(dist)
    if base is None:
        return []
    names: set[str] = set()
    for f in dist.files or []:
        parts = Path(str(f)).parts
        if parts and not parts[0].endswith((".dist-info", ".egg-info", ".data")) and parts[0] not in ("..", "bin"):
            names.add(parts[0])
    if not names:
        names.update((dist.read_text("top_level.txt") or "").split())
    return [str(base.parent / n) for n in sorted(names)]


_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requires(dist: md.Distribution) -> list[str]:
    out = []
    for r in dist.requires or []:
        if "extra ==" in r.replace("extra==", "extra =="):
            continue
        m = _REQ_NAME.match(r)
        if m:
            out.append(_canon(m.group(1)))
    return out


def _find_dist(name: str) -> md.Distribution | None:
    try:
        return md.distribution(name)
    except Exception:  # noqa: BLE001 - absent or unreadable metadata: keyed as absent
        return None


def _dist_entry(dist: md.Distribution, deep: bool) -> dict[str, Any]:
    base = _dist_path(dist)
    entry: dict[str, Any] = {"version": dist.version, "at": str(base) if base else None,
                             "record": _stat(str(base / "RECORD")) if base else None}
    if deep:  # every file of its import packages (RECORD read: small distributions only)
        h = hashlib.sha256()
        budget = [_MAX_FILES]
        for r in _roots(dist):
            if os.path.isdir(r):
                _tree(r, h, budget)
            else:
                h.update(f"f {r} {_stat(r)}\n".encode())
        entry["files"] = h.hexdigest()
    elif base is not None:  # torch, transformers, kernels: the listing of their package folder
        names = (dist.read_text("top_level.txt") or "").split() or [_canon(dist.metadata["Name"]).replace("-", "_")]
        entry["roots"] = {n: _listing(str(base.parent / n)) for n in sorted(names)}
    return entry


def _packages(m: matrix.Matrix) -> dict[str, Any]:
    """Each kernel package of the matrix that is here, what it needs (matrix) and requires (its metadata, one
    level): every file; torch, transformers and kernels: version, RECORD and folder listing. Any other
    distribution's version is in the sys.path listings (its dist-info folder's name)."""
    deep: list[str] = []
    out: dict[str, Any] = {}
    for info in m.packages.values():
        dists = [d for d in (_find_dist(x) for x in info.distributions) if d is not None]
        for d in dists:
            deep.append(_canon(d.metadata["Name"]))
            deep.extend(_requires(d))
        if dists:
            deep.extend(_canon(n) for n in info.needs)
            continue
        import importlib.util

        try:
            spec = importlib.util.find_spec(info.name)  # a source tree on the path, no dist-info
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            deep.extend(_canon(n) for n in info.needs)
            h = hashlib.sha256()
            for loc in spec.submodule_search_locations or [spec.origin or ""]:
                if os.path.isdir(loc):
                    _tree(loc, h, [_MAX_FILES])
                else:
                    h.update(f"f {loc} {_stat(loc)}\n".encode())
            out[f"import:{info.name}"] = {"origin": spec.origin, "files": h.hexdigest()}
    for name in dict.fromkeys([*_SKIP_DEPS, *deep]):
        if name in out:
            continue
        dist = _find_dist(name)
        out[name] = None if dist is None else _dist_entry(dist, name not in _SKIP_DEPS)
    return dict(sorted(out.items(), key=lambda kv: kv[0]))


def _kernelcheck() -> dict[str, Any]:
    from kernelcheck.core import version

    h = hashlib.sha256()
    root = str(version.PACKAGE)
    _tree(root, h, [_MAX_FILES])
    matrix_dir = os.path.join(os.path.dirname(root), "matrix")
    if os.path.isdir(matrix_dir):
        _tree(matrix_dir, h, [_MAX_FILES])
    return {"version": version.__version__, "at": root, "files": h.hexdigest()}


def _machine() -> dict[str, Any]:
    try:
        driver = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        driver = None
    try:
        devices = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError:
        devices = []
    return {"driver": driver, "devices": devices}  # the host name: no answer reads it (module docstring)


def _home() -> dict[str, bool]:
    """What HOME can change for an import, without its path (module docstring): set, there, writable."""
    home = os.environ.get("HOME") or ""
    return {"set": bool(home), "exists": bool(home) and os.path.isdir(home),
            "writable": bool(home) and os.access(home, os.W_OK | os.X_OK)}


_IMPORTABLE = (".py", ".pyc", ".so", ".pyd")


def _importable(path: str) -> list[Any] | None:
    """What `import NAME` can find in `path`: its folders and modules (name, size+mtime), in order of name."""
    try:
        entries = sorted(os.scandir(path or "."), key=lambda e: e.name)
    except OSError:
        return None
    out: list[Any] = []
    for e in entries:
        if e.name == "__pycache__" or e.name.startswith("."):
            continue
        try:
            if e.is_dir() or e.name.endswith(_IMPORTABLE):
                init = os.path.join(e.path, "__init__.py") if e.is_dir() else e.path
                out.append([e.name, _stat(init)])
        except OSError:
            out.append([e.name, None])
    return out


def _sys_path() -> dict[str, Any]:
    """sys.path in order with each entry's listing; the first entry, where Python put the script's folder or the
    current folder there, by what can be imported from it, not by its path (module docstring)."""
    paths = list(sys.path)
    first: list[Any] | None = None
    if paths and not getattr(sys.flags, "safe_path", False):  # -P / PYTHONSAFEPATH: no such entry
        first = _importable(paths.pop(0))
    # a relative entry (PYTHONPATH=., src) is a folder of the current one: by what it can import, like the first
    return {"first": first, "path": paths,
            "listing": {p: _listing(p) if os.path.isabs(p) else _importable(p) for p in paths}}


def _environ(m: matrix.Matrix) -> dict[str, str]:
    prefixes = (*ENV_PREFIXES, *(p.env_prefix for p in m.packages.values() if p.env_prefix))
    return {k: v for k, v in sorted(os.environ.items())
            if (k.startswith(prefixes) or k in ENV_NAMES) and k not in ENV_IGNORED}


def fingerprint(query: str | None, single: bool, children: int, m: matrix.Matrix) -> dict[str, Any]:
    """The key of this run's proof, before its steps are known (they are compared in `matches`)."""
    return {
        "format": FORMAT,
        "kernelcheck": _kernelcheck(),
        "python": {"executable": sys.executable, "version": sys.version, "prefix": sys.prefix, **_sys_path()},
        "packages": _packages(m),
        "environ": _environ(m),
        "home": _home(),
        "machine": _machine(),
        "run": {"query": query, "single": single, "children": children},
    }


def key_of(fp: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------------------------


def load(key: str) -> dict[str, Any] | None:
    """The stored proof for `key`, or None (absent, unreadable, corrupt, another format): KERNELCHECK_HOME's, else
    the one baked into KERNELCHECK_PROOF_DIR (`baked` True)."""
    return proofdirs.lookup(SUBFOLDER, key, _load)


def _load(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # a cache: a corrupt or deeply nested file is no proof
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key \
            or not isinstance(data.get("children"), list) \
            or not all(isinstance(c, dict) and isinstance(c.get("steps"), list) for c in data["children"]):
        return None
    data["file"] = str(path)
    return data


def store(key: str, fp: dict[str, Any], children: list[dict[str, Any]]) -> tuple[str, str] | None:
    """Write the proof (children: [{"steps": [...], "results": [...]}]) into KERNELCHECK_HOME (never into
    KERNELCHECK_PROOF_DIR: read only); (file, proven_at) or None."""
    proven_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    path = folder() / f"{key}.json"
    data = {"format": FORMAT, "key": key, "proven_at": proven_at, "fingerprint": fp, "children": children}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError as exc:
        log.info("import proof not cached (%s: %s)", type(exc).__name__, exc)
        return None
    _prune(path.parent)
    return str(path), proven_at


def _prune(where: Path) -> None:
    """Keep the KEEP newest proofs: every package change makes a new key, the old files are dead."""
    try:
        files = sorted(where.glob("*.json"), key=lambda f: f.stat().st_mtime_ns, reverse=True)
        for f in files[KEEP:]:
            f.unlink(missing_ok=True)
    except OSError:
        pass


def cacheable(children: list[dict[str, Any]]) -> bool:
    """Only answers without a failure in them are reused (a failure is proven again, so a fix shows at once)."""
    for c in children:
        for step, res in zip(c["steps"], c["results"], strict=True):
            kind = step["kind"]
            if kind == "probe" and (not isinstance(res, dict) or (res.get("installed") and not res.get("imports"))
                                    or res.get("error")):
                return False
            if kind == "exact" and (not isinstance(res, dict) or res.get("module_error")):
                return False
            if kind == "attrs" and (not isinstance(res, dict) or any("error" in v for v in res.values())):
                return False
    return True
