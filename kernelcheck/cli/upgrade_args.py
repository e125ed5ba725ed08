"""`doctor --upgrade SPEC [SPEC...]` / `--upgrade -r requirements.txt`: the values after --upgrade run up to
the next option of doctor's own, so several specs and pip's -r/-c files fit after one flag, as in pip."""

from __future__ import annotations

from typing import Any

import click

META_KEY = "kernelcheck.upgrade_specs"
_PIP_FILE_FLAGS = ("-r", "--requirement", "-c", "--constraint")


def split_upgrade(args: list[str]) -> tuple[list[str], list[str] | None]:
    """(the arguments without the specs, the specs after --upgrade or None when --upgrade is absent)."""
    if "--upgrade" not in args:
        return args, None
    i = args.index("--upgrade")
    rest, specs = args[: i + 1], []
    j = i + 1
    while j < len(args):
        tok = args[j]
        if tok in _PIP_FILE_FLAGS:
            specs += args[j: j + 2]
            j += 2
            continue
        if tok.startswith("-") and not (tok.startswith(("-r", "-c")) and not tok.startswith("--")
                                        and len(tok) > 2):
            break
        specs.append(tok)
        j += 1
    return rest + args[j:], specs


class UpgradeCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args, specs = split_upgrade(list(args))
        if specs is not None:
            ctx.meta[META_KEY] = specs
        return super().parse_args(ctx, args)


def upgrade_specs() -> list[str] | None:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(META_KEY) if ctx is not None else None


def forward_args(values: dict[str, Any]) -> list[str]:
    """doctor's own options, as the child doctor processes of a forecast get them."""
    out: list[str] = []
    for opt, key in (("--model", "model"), ("--mode", "mode"), ("--device", "hub_device"),
                     ("--arch", "arch"), ("--packing", "packing")):
        if values.get(key):
            out += [opt, str(values[key])]
    if values.get("exact"):
        out.append("--exact")
    if values.get("hub") is not None:
        out.append("--hub" if values["hub"] else "--no-hub")
    return out
