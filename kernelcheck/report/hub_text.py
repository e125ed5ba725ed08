"""The Hub section's sentences (its JSON `lines` and the `hub` block of the text), from report/hub.py's values."""

from __future__ import annotations

from kernelcheck.integrations.kernels_hub import Resolution
from kernelcheck.report.device_text import origin_words
from kernelcheck.report.hub import (
    HubLine,
    HubRow,
    KernelsAbsentLine,
    LayoutUnknownLine,
    ListingLine,
    PrintedLine,
    ResolutionLines,
    RowLine,
    SwitchLine,
    TargetLine,
    UseLine,
    WindowLine,
)


def lines(items: list[HubLine]) -> list[str]:
    """The section's lines, in the order its items were added; rows that say the same thing (no Hub kernel for
    this device, nothing mapped) are one line naming them all, where the first of them stood."""
    out: list[str] = []
    groups = _same_rows(items)
    for item in items:
        if isinstance(item, RowLine) and id(item) in groups:
            group = groups.pop(id(item))
            out.append(_group_text(group) if len(group) > 1 else _item_lines(item)[0])
            continue
        if isinstance(item, RowLine) and _fold_key(item) is not None:
            continue  # said in its group's line
        out.extend(_item_lines(item))
    return out


def _fold_key(item: RowLine) -> tuple[str, str, str | None] | None:
    """Rows without a Hub build say why in `note` alone: rows of one kind with the same note fold together."""
    row = item.row
    return None if row.repo is not None or row.note is None else (row.kind, row.note, row.path)


def _same_rows(items: list[HubLine]) -> dict[int, list[RowLine]]:
    """{id of the first row of each group: the group}, groups of rows with the same fold key."""
    by_key: dict[tuple[str, str, str | None], list[RowLine]] = {}
    for item in items:
        if isinstance(item, RowLine) and (key := _fold_key(item)) is not None:
            by_key.setdefault(key, []).append(item)
    return {id(group[0]): group for group in by_key.values()}


def _group_text(group: list[RowLine]) -> str:
    row, used = group[0].row, group[0].used
    runs = " -> the torch path runs" if used and row.kind == "function" and row.path not in ("hub", "package",
                                                                                              "load-fails") else ""
    return f"{', '.join(g.row.name for g in group)} ({row.kind}s, each): {row.note}{runs}"


def _item_lines(item: HubLine) -> list[str]:
    if isinstance(item, PrintedLine):
        return [item.text]
    if isinstance(item, WindowLine):
        return [_window(item)]
    if isinstance(item, SwitchLine):
        said = "set" if item.is_set else "transformers' default"
        return [f"USE_HUB_KERNELS={item.use_hub_kernels} ({said}: Hub decorators {'on' if item.enabled else 'off'})"
                f" · from_pretrained use_kernels default: {item.use_kernels_default} ({item.use_kernels_source})"]
    if isinstance(item, UseLine):
        why = item.why
        if item.said_above and why.startswith(item.said_above):  # the lines above say the rest of a YES too
            why = ("the use_kernels default, the kernels window and USE_HUB_KERNELS above all allow them" if item.used
                   else "by the use_kernels default above" + why[len(item.said_above):])
        return [f"Hub kernels in this job: {'YES' if item.used else 'no'} - {why}"]
    if isinstance(item, ListingLine):
        return [_listing(item)]
    if isinstance(item, (TargetLine, KernelsAbsentLine, LayoutUnknownLine)):
        return [_note(item)]
    if isinstance(item, RowLine):
        return [_row_text(item.row, item.used) + (_runs(item.row) if item.used else "")]
    if isinstance(item, ResolutionLines):
        return _resolution(item.spec, item.resolution)
    return _repo_check(item.resolution)  # RepoCheckLines


def _note(item: TargetLine | KernelsAbsentLine | LayoutUnknownLine) -> str:
    """The one-line notes: the --torch/--cuda/--arch target, no `kernels`, no adapter for its layout."""
    if isinstance(item, TargetLine):
        cuda = f"CUDA {item.cuda}" if item.cuda else ("CPU" if item.cuda == "" else "CUDA as installed")
        gpu = f", GPU {item.sm}" if item.sm else ""
        return (f"resolving for torch {item.torch or 'as installed'}, {cuda}{gpu} "
                "(--torch/--cuda/--arch): kernels' resolver with these values instead of this machine's")
    if isinstance(item, KernelsAbsentLine):
        if item.default_refuses:
            return ("kernels is not installed: from_pretrained's use_kernels=True default raises ValueError at load "
                    "(hub-kernels-unusable), so no variant is resolved")
        return "kernels is not installed: transformers loads no Hub kernel here, so no variant is resolved"
    return f"{item.reason}: the builds kernels would load are not listed"


def _window(w: WindowLine) -> str:
    state = "inside" if w.met else "OUTSIDE"
    outside = (" -> from_pretrained refuses to load (ValueError)" if w.refused
               else " -> transformers treats kernels as absent")
    return (f"transformers {w.transformers} accepts kernels {w.window} ({w.window_source}); "
            f"installed kernels {w.kernels or 'absent'}: {state} the window" + ("" if w.met else outside))


def _listing(item: ListingLine) -> str:
    if item.listing == "offline":
        listing = "offline: LOCAL_KERNELS and the Hugging Face cache"
    elif item.listing == "online":
        listing = "LOCAL_KERNELS, then the Hub (the cache if the Hub cannot be reached)"
    else:
        listing = "LOCAL_KERNELS and the Hugging Face cache only (" + \
            ("Hub kernels are not in use" if not item.used else "--source cache") + ")"
    return (f"device {item.device} (from {origin_words(item.origin)}) · mode {item.mode} · variants listed from "
            f"{listing}")


def _runs(row: HubRow) -> str:
    """Which path the job runs for the row: the Hub build, the pip package bound at import, or torch."""
    if row.path == "hub":
        return " -> the Hub path runs"
    if row.path == "load-fails":
        return " -> the model load fails"
    if row.path == "package":
        return f" -> the pip path runs ({row.implementation})"
    if row.kind == "function" and row.implementation:
        return f" -> the torch path runs ({row.implementation})"
    return ""


def _row_text(row: HubRow, used: bool) -> str:
    head = f"{row.name} ({row.kind}{', at model.train()' if row.phase == 'train' else ''})"
    if row.repo is None:
        return f"{head}: {row.note}"
    label = f"{head} -> {row.repo} layer {row.layer}"
    if row.variant and row.blocked:
        return f"{label}: build {row.variant} is cached but NOT LOADABLE offline: {row.blocked}"
    if row.variant and not row.problem:
        return f"{label}: build {row.variant} {'will be used' if used else 'would be used'} (from {row.source})"
    if row.variant:
        return f"{label}: build {row.variant} chosen but {row.problem}"
    if row.error:  # said once, in the repository's lines below
        return f"{label}: no build listed (see {row.repo} below)"
    return f"{label}: NO BUILD for this torch/CUDA (nearest: {row.nearest})"


def _resolution(spec: str, res: Resolution) -> list[str]:
    loc = f" ({res.location})" if res.location else ""
    commit = f" commit {res.commit[:12]}" if res.commit else ""
    out = [f"{spec}: no build listed:" if res.source == "none" else f"{spec} from {res.source}{loc}{commit}:"]
    for d in res.decisions:
        out.append(f"    {'chosen' if d.chosen else 'ok':<9}{d.variant}" if d.accepted
                   else f"    rejected {d.variant}: {d.reason}")
    if res.error:
        out.append(f"    {res.error}")
    if res.nearest:
        out.append(f"    nearest {res.nearest} would match {res.would_match}")
    out.extend(f"    note: {n}" for n in res.notes)
    return out


def _repo_check(res: Resolution) -> list[str]:
    """`kernelcheck hub --repo`: where the repository was listed from, each variant, and what stops it."""
    out = [f"{res.spec}" + (": no build listed" if res.source == "none" else f" from {res.source}")
           + (f" ({res.location})" if res.location else "")
           + (f": build {res.chosen} will be used" if res.chosen else "")]
    for d in res.decisions:
        out.append(f"    {'chosen' if d.chosen else ('ok' if d.accepted else 'rejected')} "
                   f"{d.variant}" + (f": {d.reason}" if d.reason else ""))
    if res.error:
        out.append(f"    {res.error}")
    elif res.chosen and res.blocked:
        out.append(f"    NOT LOADABLE offline: {res.blocked}")
    return out
