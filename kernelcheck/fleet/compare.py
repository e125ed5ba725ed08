"""`kernelcheck compare`: the fleet table for reports collected another way (files on a shared volume)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from kernelcheck.core.errors import BadInput
from kernelcheck.core.paths import checked, regular_file
from kernelcheck.fleet import report_check, summary
from kernelcheck.fleet.gather import NO_REPORT, Missing
from kernelcheck.fleet.record import RankRecord

log = logging.getLogger(__name__)


def report_files(paths: list[str]) -> list[Path]:
    """The files named, a folder standing for the *.json inside it (a Slurm prolog's shared folder)."""
    out: list[Path] = []
    for p in (checked(text, "the report") for text in paths):  # ENAMETOOLONG & co: bad input
        if p.is_dir():
            found = sorted(p.glob("*.json"))
            if not found:
                raise BadInput(f"folder {p} holds no *.json reports.")
            out += found
        else:
            out.append(regular_file(p, "the report", "Give report files (kernelcheck doctor --json > "
                                    "node.json) or folders of them."))
    return _once(out)


def _once(out: list[Path]) -> list[Path]:
    """Each file once: the same report named twice (a file and its folder, a glob and the file) is one node,
    never two that agree (which would pass --expect with a node missing)."""
    seen: dict[Path, Path] = {}
    for p in out:
        key = p.resolve()
        if key in seen:
            click.echo(f"kernelcheck compare: {p} names the same file as {seen[key]}: counted once.", err=True)
            continue
        seen[key] = p
    out = list(seen.values())
    if not out:
        raise BadInput("give one or more report files (kernelcheck doctor --json > node.json) or folders.")
    return out


def load(path: Path) -> RankRecord:
    """One file as a fleet record labelled by its file name."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {path}: {exc}.") from None
    except RecursionError:
        raise BadInput(f"{path} nests JSON too deeply to be a kernelcheck report.") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path} is not JSON ({exc.msg} at line {exc.lineno}): pass the stdout of "
                       "`kernelcheck doctor --json`, not its text output or a log.") from None
    data = report_check.check_fields(summary.check_report(data, str(path)), str(path))
    return summary.summarise(data, label=path.stem)  # read once, here: the table takes the record's fields


def collect(paths: list[str], expect: int | None = None) -> tuple[list[RankRecord], dict[int, Missing]]:
    """Records from the files, and, with `expect`, the count of reports that never arrived as missing."""
    records = [load(p) for p in report_files(paths)]
    missing: dict[int, Missing] = {}
    if expect is not None and len(records) < expect:
        for i in range(len(records), expect):
            missing[i] = Missing(NO_REPORT, expected=expect, found=len(records))
    return records, missing
