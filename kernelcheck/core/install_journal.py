"""Where an install left its transaction (install/txn.py): `SITE/.kernelcheck-txn/journal.json` exists from just
before pip runs until the install commits or rolls back. One found while no kernelcheck install runs means an
install was interrupted (SIGKILL, a power cut) with pip half done; the next `kernelcheck install` (any model, the
same environment or --target) rolls it back from the journal first. doctor says so (`interrupted`)."""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

from kernelcheck.core.status import Finding, Severity

TXN = ".kernelcheck-txn"


def interrupted(extra: list[str] | None = None) -> list[tuple[Path, list[str]]]:
    """(site folder, distributions the interrupted install was replacing) for each folder on sys.path (and this
    interpreter's site-packages) that holds a journal whose install is no longer running."""
    from kernelcheck.core import lifeline

    folders = dict.fromkeys([sysconfig.get_paths()["purelib"], *sys.path, *(extra or [])])
    out = []
    for folder in folders:
        journal = Path(folder or ".") / TXN / "journal.json"
        try:
            data = json.loads(journal.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        pid = data.get("pid") if isinstance(data, dict) else None
        if isinstance(pid, int) and lifeline.alive([pid]):
            continue  # an install running now
        dists = data.get("dists") if isinstance(data, dict) else None
        out.append((journal.parent.parent, [d for d in dists or [] if isinstance(d, str)]))
    return out


def findings() -> list[Finding]:
    """doctor's `install-interrupted` warning, one per interrupted install found."""
    out = []
    for site, dists in interrupted():
        what = f" of {', '.join(dists)}" if dists else ""
        out.append(Finding("install-interrupted", Severity.WARNING,
                           f"an install{what} into {site} was interrupted while pip ran (its journal {site / TXN} is "
                           "still there): those packages may be half-installed, so an import failure above can come "
                           "from that.",
                           "run `kernelcheck install` again (the same environment or --target): it puts the "
                           "environment back from the journal first, then installs"))
    return out
