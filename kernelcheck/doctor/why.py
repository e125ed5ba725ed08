"""Why transformers bound a function's torch reference path here: the package missing, not importing, lacking
the function, a misnamed registration, an unsupported device, or a rebind after import (reason, fix, status)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

from kernelcheck.core import environment, matrix, rules
from kernelcheck.core.device import Device, gpu_unnamed, runs_cuda_kernels
from kernelcheck.core.status import Cause, FunctionStatus, Status, StatusWord
from kernelcheck.doctor.wording import install_fix as _install_fix
from kernelcheck.doctor.wording import no_device_reason as _no_device_reason
from kernelcheck.doctor.wording import unnamed_fix, unnamed_reason
from kernelcheck.integrations import transformers as bindings_mod


def device_ok(pkg: matrix.PackageInfo, env: environment.Environment, device: Device) -> bool:
    """Whether `pkg`'s kernels run on the verdict's device with the torch installed (a CUDA verdict for a GPU that
    is not here included: core/device.py runs_cuda_kernels)."""
    return "cuda" in pkg.devices and runs_cuda_kernels(device, env) and not gpu_unnamed(device, env)


def package_row(fn: str, dist: str, b: bindings_mod.Binding, pkg: matrix.PackageInfo | None,
                env: environment.Environment, device: Device, query: str | None, module: str, per_call: bool,
                phase: str, used: bool) -> FunctionStatus:
    """The status of a function transformers binds to its package, on the verdict's `device` with the torch
    installed. `per_call`: transformers tests the input's device on every call (5.25+) and runs its torch function
    where the package's kernels do not run."""
    if pkg is not None and "cuda" in pkg.devices and gpu_unnamed(device, env):
        return FunctionStatus(fn, dist, Status.UNSUPPORTED, b.implementation, unnamed_reason(pkg),
                              unnamed_fix(query), phase, used)
    if pkg is not None and not device_ok(pkg, env, device):
        impl, reason = b.implementation, f"bound to {pkg.title}, but {_no_device_reason(env, pkg, device)}"
        if per_call and b.extra.get("attribute"):
            impl = f"{module}.{b.extra['attribute']}"
            reason = (f"transformers {env.transformers} binds {b.implementation} but checks the input device on "
                      f"every call: {_no_device_reason(env, pkg, device)}, so the torch function runs")
        return FunctionStatus(fn, dist, Status.UNSUPPORTED, impl, reason, "run on a machine with an NVIDIA GPU",
                              phase, used)
    return FunctionStatus(fn, dist, Status.FAST, b.implementation, None, None, phase, used)


def import_error_fill(env: environment.Environment, dist: str, package: str, query: str | None) -> dict[str, str]:
    """The values an import_error rule's message and fix are formatted with."""
    torch_v = env.torch.version if env.torch else None
    return {"dist": dist, "package": package, "model": query or "M", "torch": torch_v or "?",
            "torch_mm": environment.torch_minor(torch_v) or "0.0"}


AttrCheck = Callable[[str, str, str], dict[str, Any]]


def attr_in_process(module: str, fn: str, package: str) -> dict[str, Any]:
    """`import module; hasattr(fn)` here: {"has": bool} or {"error": text}."""
    try:
        return {"has": hasattr(importlib.import_module(module), fn)}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}


class Why(NamedTuple):
    """Why the torch path: the words, the fix, the status, and the cause as a value (decisions read that)."""

    reason: str
    fix: str | None
    status: Status | StatusWord
    cause: Cause | None = None
    implementation: str | None = None  # what runs, where it is not the binding's (a prediction for another device)


def _why_misnamed(b: bindings_mod.Binding, env: environment.Environment, m: matrix.Matrix) -> Why | None:
    """The reason when transformers registered the kernel under a name it never looks up (matrix "misnamed")."""
    if b.registered_as:
        for e in m.transformers.get("misnamed", []):
            if e["registered"] == b.registered_as:
                return Why(e["reason"].format(transformers=env.transformers), e["fix"], Status.FALLBACK)
    return None


def _why_not_installed(pkg: matrix.PackageInfo, env: environment.Environment, query: str | None,
                       device: Device) -> Why:
    """The reason and install fix for a package that is not installed (on a GPU-less machine: say so too)."""
    dist = pkg.install_distribution
    reason = f"{pkg.title} is not installed (pip distribution {dist})"
    if not device_ok(pkg, env, device) and not gpu_unnamed(device, env):  # unnamed: it would run on the CUDA GPU
        reason += f"; and {_no_device_reason(env, pkg, device)}"
        return Why(reason, _install_fix(query, dist) + " on a machine with an NVIDIA GPU", Status.FALLBACK,
                   Cause.NOT_INSTALLED)
    return Why(reason, _install_fix(query, dist), Status.FALLBACK, Cause.NOT_INSTALLED)


def _why_no_import(pkg: matrix.PackageInfo, st: environment.PackageState,
                   env: environment.Environment, query: str | None, m: matrix.Matrix) -> Why:
    """The reason for an installed package that does not import; a matching import_error rule gives the fix."""
    rule = rules.match_import_error(st.error or "", m)
    reason = f"{st.distribution} {st.version} is installed but does not import: {st.error}"
    if rule:
        fill = import_error_fill(env, st.distribution or pkg.name, pkg.name, query)
        reason += f" ({rule.title})"
        return Why(reason, rule.fix.format(**fill), Status.FALLBACK)
    return Why(reason, _install_fix(query, pkg.install_distribution), Status.FALLBACK)


def _why_no_attribute(fn: str, info: matrix.FunctionInfo, pkg: matrix.PackageInfo,
                      st: environment.PackageState, query: str | None, attr: AttrCheck) -> Why | None:
    """The reason when the function's module fails to import or lacks the function; None when it is there."""
    dist = pkg.install_distribution
    found = attr(info.module, fn, pkg.name)
    if "error" in found:
        return Why(f"`import {info.module}` fails: {found['error']}", _install_fix(query, dist), Status.FALLBACK)
    if not found.get("has"):
        return Why(f"{st.distribution} {st.version} has no `{info.module}.{fn}` (too old or too new for this "
                f"transformers)", f"pip install -U {dist}  (kernelcheck install --model {query or 'M'} picks a "
                "compatible version)", Status.FALLBACK)
    return None


def _why_root_import(fn: str, pkg: matrix.PackageInfo, st: environment.PackageState,
                     env: environment.Environment, m: matrix.Matrix) -> Why | None:
    """The reason when this transformers gates the package on a root import that is missing (matrix "root_import")."""
    for e in m.transformers.get("root_import", []):
        if e["package"] == pkg.name and rules.version_in(env.transformers, e["transformers"]) \
                and environment.dist_version(e["unless_distribution"]) is None:
            fill = {"transformers": env.transformers or "", "function": fn, "version": st.version or ""}
            return Why(e["reason"].format(**fill), e["fix"].format(**fill), Status.FALLBACK)
    return None


def why_torch(fn: str, b: bindings_mod.Binding, env: environment.Environment, query: str | None,
              m: matrix.Matrix, device: Device, attr: AttrCheck = attr_in_process) -> Why:
    """(reason, fix, status) for a function transformers bound to its torch reference path, judged for the
    verdict's `device`."""
    info = m.functions.get(fn)
    pkg = m.packages.get(b.package or (info.package if info else ""))
    if pkg is None:
        return Why(f"transformers bound the torch path; package '{b.package}' is unknown to kernelcheck", None,
                   Status.FALLBACK)
    st = env.packages.get(pkg.name)
    misnamed = _why_misnamed(b, env, m)
    if misnamed is not None:
        return misnamed
    if st is None or not st.installed:
        return _why_not_installed(pkg, env, query, device)
    if not st.imports:
        return _why_no_import(pkg, st, env, query, m)
    if info is not None and (missing := _why_no_attribute(fn, info, pkg, st, query, attr)) is not None:
        return missing
    root = _why_root_import(fn, pkg, st, env, m)
    if root is not None:
        return root
    if "cuda" in pkg.devices and gpu_unnamed(device, env) and info is not None:
        return Why(f"here transformers {env.transformers} finds no usable device and binds the torch path; on a CUDA "
                   f"GPU it binds {st.distribution} {st.version}: {unnamed_reason(pkg)}", unnamed_fix(query),
                   Status.UNSUPPORTED, implementation=f"{info.module}.{fn}")
    if not device_ok(pkg, env, device):
        return Why(f"transformers {env.transformers} enables {pkg.title} only on a supported device: "
                   f"{_no_device_reason(env, pkg, device)}",
                   "run on a machine with an NVIDIA GPU and a CUDA build of torch", Status.UNSUPPORTED)
    if device.predicted and info is not None:  # bound at import here, where the verdict's GPU is not
        return Why(f"predicted for a CUDA GPU that is not on this machine: here transformers {env.transformers} finds "
                   f"no usable device and binds the torch path; on the CUDA GPU this verdict is for, "
                   f"{st.distribution} {st.version} is bound", None, Status.FAST,
                   implementation=f"{info.module}.{fn}")
    return Why(f"transformers {env.transformers} chose the torch path although {st.distribution} {st.version} imports; "
            "was the package installed after the modeling module was imported? Restart the process.",
            None, Status.FALLBACK)
