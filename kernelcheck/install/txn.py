"""The install's transaction: a backup of what pip will replace, a journal written before pip runs, and the
rollback that puts a site back as it was (on a failed import check, SIGINT/SIGTERM, or, after a SIGKILL,
by the next install's `repair`). install/apply.py runs pip inside it.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from kernelcheck.core import install_journal, signals
from kernelcheck.core.errors import Interrupted


def site_dir(target: str | None) -> Path:
    """Where packages land: --target, or this interpreter's site-packages."""
    return Path(target) if target else Path(sysconfig.get_paths()["purelib"])



# ---------------------------------------------------------------- backup / rollback

def _dist_infos(site: Path, dist: str) -> list[Path]:
    want = canonicalize_name(dist)
    out: list[Path] = []
    if not site.is_dir():
        return out
    for p in site.glob("*.dist-info"):
        name = p.name[: -len(".dist-info")].rsplit("-", 1)[0]
        if canonicalize_name(name) == want:
            out.append(p)
    return out


def _record_files(site: Path, dist_info: Path) -> list[Path]:
    rec = dist_info / "RECORD"
    files = [dist_info]
    try:
        with open(rec, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                if row:
                    files.append((site / row[0]).resolve())
    except OSError:
        pass
    return files


def _remove_dist(site: Path, dist: str) -> None:
    for di in _dist_infos(site, dist):
        for f in _record_files(site, di):
            if f.is_file() or f.is_symlink():
                f.unlink(missing_ok=True)
        shutil.rmtree(di, ignore_errors=True)


@dataclass
class Backup:
    root: Path
    saved: dict[str, list[tuple[Path, Path]]] = field(default_factory=dict)  # dist -> [(original, copy)]

    def save(self, site: Path, dist: str) -> None:
        """Copy `dist`'s files (its RECORD) under root/dist: files in `site` by their relative path, files
        outside it (a venv's bin/ scripts) under _outside/ by their absolute path."""
        pairs = []
        base = site.resolve()
        for di in _dist_infos(site, dist):
            for f in _record_files(site, di):
                inside = f.is_relative_to(base)
                rel = f.relative_to(base) if inside else Path("_outside") / f.relative_to(f.anchor)
                dst = self.root / dist / rel
                if f.is_dir() and not f.is_symlink():
                    if inside:
                        shutil.copytree(f, dst, dirs_exist_ok=True, symlinks=True)
                        pairs.append((f, dst))
                elif f.is_file() or f.is_symlink():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dst, follow_symlinks=False)
                    pairs.append((f, dst))
        self.saved[dist] = pairs

    def restore(self, site: Path, dist: str) -> None:
        _remove_dist(site, dist)
        for orig, copy in self.saved.get(dist, []):
            if copy.is_dir():
                shutil.copytree(copy, orig, dirs_exist_ok=True, symlinks=True)
            else:
                orig.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(copy, orig)


# ---------------------------------------------------------------- the journal: undo an interrupted install

TXN = install_journal.TXN  # the folder doctor also looks for (core/install_journal.py)
# pip's AdjacentTempDirectory (pip/_internal/utils/temp_dir.py): while it uninstalls `fla` it stashes it as
# `~la` beside it; a pip ended mid-uninstall leaves that stash in site-packages
_PIP_STASH_CHARS = "-~.=%0123456789"


def _wheel_tops(path: str) -> list[str]:
    import zipfile

    with zipfile.ZipFile(path) as zf:
        return sorted({n.split("/", 1)[0] for n in zf.namelist() if not n.split("/", 1)[0].endswith(".data")})


def _tree(top: Path) -> list[str]:
    """Every path under `top` (folders too), relative to it: what an existing top-level entry held."""
    if not top.is_dir() or top.is_symlink():
        return []
    return sorted(str(p.relative_to(top)) for p in top.rglob("*"))


def begin(site: Path, dists: list[str], files: list[str], manifest_path: Path | None = None) -> Path:
    """Before pip runs: back up every distribution that will be replaced (and the manifest), then write the
    journal (what site-packages held, what these wheels add). The journal is written last, atomically: a
    journal on disk always has its complete backup beside it; a backup without a journal is just removed."""

    txn = site / TXN
    shutil.rmtree(txn, ignore_errors=True)
    (txn / "backup").mkdir(parents=True)
    backup = Backup(txn / "backup")
    for d in dists:
        backup.save(site, d)
    tops = sorted({t for f in files for t in _wheel_tops(f)})
    before = sorted(p.name for p in site.iterdir()) if site.is_dir() else []
    data: dict[str, Any] = {"pid": os.getpid(), "dists": dists, "tops": tops, "before": before,
                  "top_files": {t: _tree(site / t) for t in tops if t in before}}
    if manifest_path is not None:
        data["manifest"] = str(manifest_path)
        data["manifest_existed"] = manifest_path.is_file()
        if manifest_path.is_file():
            shutil.copy2(manifest_path, txn / "manifest.json")
    tmp = txn / ".journal.tmp"
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, txn / "journal.json")
    return txn


def _prune(top: Path, keep: list[str]) -> None:
    """Remove what is under `top` and was not there before (files first, then folders, deepest first)."""
    kept = set(keep)
    for p in sorted(top.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        if str(p.relative_to(top)) in kept:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _is_pip_stash(name: str, originals: set[str]) -> bool:
    """`~la` for `fla`, `~-a` ...: "~", then pip's leading characters, then the rest of an original name."""
    if not name.startswith("~"):
        return False
    return any(len(o) == len(name) and any(name[i:] == o[i:] and all(c in _PIP_STASH_CHARS for c in name[1:i])
                                           for i in range(1, len(o)))
               for o in originals)


def rollback_site(site: Path, txn: Path) -> list[str]:
    """Put site-packages back as the journal recorded it: what the wheels added removed, the replaced
    distributions and the manifest restored. Idempotent: a rollback cut short (SIGKILL) is redone by the
    next run, as the journal goes last."""

    try:
        data = json.loads((txn / "journal.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        shutil.rmtree(txn, ignore_errors=True)  # no journal: pip never ran, nothing to undo
        return []
    _remove_new_entries(site, set(data.get("before", [])), list(data.get("tops", [])))
    for dist in data.get("dists", []):
        _remove_dist(site, dist)  # whatever pip got to write of the new version
    for top, keep in data.get("top_files", {}).items():
        if (site / top).is_dir():
            _prune(site / top, keep)  # files of the new version that the old one did not have
    _restore_backup(site, txn / "backup", list(data.get("dists", [])))
    if data.get("manifest"):
        _restore_manifest(Path(data["manifest"]), bool(data.get("manifest_existed")), txn / "manifest.json")
    end_txn(txn)
    return list(data.get("dists", []))


def _remove_new_entries(site: Path, before: set[str], tops: list[str]) -> None:
    """Remove the site's top-level entries the wheels added (and pip's stash folders), never one that was there."""
    for entry in sorted(site.iterdir()) if site.is_dir() else []:
        name = entry.name
        if name in before or name == TXN or not (name in tops or _is_pip_stash(name, before | set(tops))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _restore_manifest(man: Path, existed: bool, saved: Path) -> None:
    """The manifest as it was before the install: the saved copy back, or none if there was none."""
    if existed and saved.is_file():
        man.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(saved, man)
    elif not existed:
        man.unlink(missing_ok=True)


def _restore_backup(site: Path, root: Path, dists: list[str]) -> None:
    for dist in dists:
        for copy in (root / dist).rglob("*") if (root / dist).is_dir() else ():
            if not (copy.is_file() or copy.is_symlink()):
                continue
            rel = copy.relative_to(root / dist)
            orig = Path("/", *rel.parts[1:]) if rel.parts[0] == "_outside" else site / rel
            orig.parent.mkdir(parents=True, exist_ok=True)
            if orig.is_symlink():
                orig.unlink()
            shutil.copy2(copy, orig, follow_symlinks=False)


def end_txn(txn: Path) -> None:
    """The journal first (the commit point: without it nothing is undone), then the rest."""
    (txn / "journal.json").unlink(missing_ok=True)
    shutil.rmtree(txn, ignore_errors=True)


def repair(target: str | None, log: Callable[[str], None] = print) -> None:
    """Undo what an interrupted install left (a journal whose process is gone); called under the lock."""
    site = site_dir(target)
    txn = site / TXN
    if not txn.exists():
        return
    if not (txn / "journal.json").exists():
        shutil.rmtree(txn, ignore_errors=True)  # a backup begun before a kill, pip never ran
        return
    with signals.held():  # the repair completes; a signal that came meanwhile then stops the command
        dists = rollback_site(site, txn)
    log(f"repaired an interrupted kernelcheck install in {site}: {', '.join(dists) or 'nothing'} put back as "
        "it was before")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises Interrupted, as SIGINT raises KeyboardInterrupt (the CLI does this for every command;
    here for callers of execute() as a library)."""
    import signal

    def raise_it(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    try:
        old = signal.getsignal(signal.SIGTERM)
        if old is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, raise_it)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        if old is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, old)


def deferred_signals() -> AbstractContextManager[list[int]]:
    """SIGINT/SIGTERM wait until the block ends (a rollback or a commit is never cut in half by a second
    Ctrl-C); the signals that came are listed for the caller."""
    return signals.held(reraise=False)


