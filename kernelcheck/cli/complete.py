"""Shell completion of values (click's `shell_complete`): --model completes the aliases and model types of the
matrix (`kernelcheck models`), so `--model qw<TAB>` offers qwen3.8-27b as flags are offered."""

from __future__ import annotations

import click
from click.shell_completion import CompletionItem


def model_names(incomplete: str) -> list[str]:
    """The aliases, then the model types, that start with `incomplete` (case-insensitive)."""
    from kernelcheck.commands.context import Context

    m = Context.from_environ().matrix  # a completion is a command of its own: the matrix the settings name
    prefix = incomplete.lower()
    names = list(dict.fromkeys([*m.aliases, *m.model_types]))
    return [n for n in names if n.lower().startswith(prefix)]


def complete_model(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    try:
        return [CompletionItem(n) for n in model_names(incomplete)]
    except Exception:  # noqa: BLE001 - a completion never prints a traceback into the user's shell
        return []
