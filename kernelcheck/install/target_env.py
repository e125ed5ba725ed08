"""The environment of another machine's torch build, for planning (`install --dry-run --torch/--cuda/--python`).

A CPU build box plans for an H200 image (torch 2.11 + CUDA 13.0, CPython 3.12) without installing a 526 MB CUDA
torch: the probed environment with its torch, CUDA, Python and triton replaced by the target's. transformers and
the kernel packages stay as installed here (the image is expected to hold the same); the GPUs come from --arch.
The triton a torch minor pins is data (matrix/torch.toml), never a guess: a minor missing there plans with triton
unknown, and the finding says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kernelcheck.core.environment import Environment, TorchInfo, torch_minor
from kernelcheck.core.status import Finding, Severity
from kernelcheck.core.targets import TargetBuild

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def triton_pins(*, m: Matrix) -> dict[str, str]:
    """torch minor -> the triton version its Linux wheel pins (`m`'s torch.toml)."""
    return {mm: str(row["version"]) for mm, row in m.table("torch.toml").get("triton", {}).items()}


def for_target(env: Environment, build: TargetBuild, pins: dict[str, str]) -> tuple[Environment, Finding]:
    """`env` as the target build would be (pure), and the info finding that says what was planned for."""
    here = env.torch
    base = (here.version.split("+")[0] if here else "0.0.0")
    mm = build.torch or torch_minor(base) or "0.0"
    version = f"{build.torch}.0" if build.torch else base
    cuda = build.cuda if build.cuda is not None else (here.cuda if here else None)
    local = f"+cu{cuda.replace('.', '')}" if cuda else "+cpu"
    abi = True if build.torch else (here.cxx11abi if here else True)  # PyPI torch wheels: cxx11abi since 2.7
    torch = TorchInfo(version + local, cuda or None, abi, None, bool(env.gpus) and bool(cuda))
    triton = pins.get(mm) if cuda else None
    py = build.python or env.python.rsplit(".", 1)[0]
    new = replace(env, torch=torch, triton=triton if (build.torch or build.cuda is not None) else env.triton,
                  python=build.python or env.python, python_tag=f"cp{py.replace('.', '')}")
    unknown = bool(cuda) and (build.torch or build.cuda is not None) and triton is None
    message = (f"planned for torch {torch.version} (CUDA {cuda or 'none'}, cxx11abi {abi}), CPython {py}, triton "
               f"{new.triton or 'unknown'} from --torch/--cuda/--python, not installed here: transformers and the "
               "kernel packages are taken as installed here, the GPUs from --arch. pip resolves a fix's dependency "
               "window (tilelang) against the target's torch and triton, held as installed by their metadata only "
               "(this machine's index need not offer them); the run lines name versions, which the target's pip "
               "fetches for its own Python (from the wheelhouse they name, else its index).")
    if unknown:
        message += (f" The triton torch {mm} pins is not in matrix/torch.toml, so rules that depend on the triton "
                    "version (fla#640 on Hopper) could not be checked.")
    return new, Finding("build-target", Severity.WARNING if unknown else Severity.INFO, message,
                        reference="matrix/torch.toml (torch -> triton pins)")
