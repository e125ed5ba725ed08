"""--torch / --cuda / --python: plan or resolve for another machine's torch build than the one installed here.

One option helper for every command that plans for a target (hub, install): the same flags, the same help and the
same parser, so `kernelcheck hub --torch 2.11 --cuda 13.0` and `kernelcheck install --torch 2.11 --cuda 13.0
--python 3.12` mean the same machine. A CPU build box plans for an H200 image without installing a CUDA torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from kernelcheck.core.targets import TargetBuild, parse_target

__all__ = ["TargetBuild", "parse_target", "target_options"]

F = TypeVar("F", bound=Callable[..., Any])


def target_options(*, python: bool = True) -> Callable[[F], F]:
    """Add --torch X.Y, --cuda X.Y|cpu (and --python X.Y) to a command; its function receives torch_v, cuda_v
    (and python_v)."""

    def deco(fn: F) -> F:
        if python:
            fn = click.option("--python", "python_v", default=None, metavar="X.Y",
                              help="Plan for this CPython (wheel tags cpXY) instead of this one.")(fn)
        fn = click.option("--cuda", "cuda_v", default=None, metavar="X.Y|cpu",
                          help="Plan for a torch built for this CUDA (or cpu) instead of the installed build.")(fn)
        return click.option("--torch", "torch_v", default=None, metavar="X.Y",
                            help="Plan for this torch minor instead of the installed one (a build machine for "
                                 "another image, e.g. --torch 2.11 --cuda 13.0 --arch 9.0 for an H200).")(fn)

    return deco
