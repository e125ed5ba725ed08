"""doctor for the lazy-kernel regime (transformers 5.13-5.14, Mamba family): what the mixer's __init__ resolves.

`lazy_load_kernel(NAME)` runs when the model is built, not when the modeling module is imported, so there is no
binding to read: doctor resolves each gate name the way lazy_load_kernel would here (facts and references in
matrix/transformers.toml [lazy_kernels]):
- `kernels` inside transformers' window: get_kernel(<Hub repo>, version=1), USE_HUB_KERNELS not read; offline
  without a cached build it raises in __init__ (BROKEN);
- otherwise the pip package, only when import_utils has `is_<name>_available()` and it is true (torch with CUDA,
  package importable).
The layer's forward runs its fused path only when every gate name is set and the weights are on CUDA; otherwise
its torch path (torch_forward / slow_forward) for the whole layer, or, for the types in [lazy_kernels.raises],
it raises.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kernelcheck.core import environment, matrix, models, settings
from kernelcheck.core.device import Device, gpu_unnamed, runs_cuda_kernels
from kernelcheck.core.status import Finding, FunctionStatus, Mode, Severity, Status
from kernelcheck.doctor.wording import install_fix, no_device_reason, unnamed_fix, unnamed_reason
from kernelcheck.integrations import transformers

if TYPE_CHECKING:
    from kernelcheck.integrations.transformers_hub import TransformersHub




def _hub_state(repo: dict[str, Any]) -> tuple[bool, str]:
    """(cached, where) for a _HUB_KERNEL_MAPPING entry in the cache kernels reads."""
    from kernelcheck.integrations import kernels_hub

    try:
        snap, _ref, _commit, why = kernels_hub._cache_snapshot(repo["repo_id"], repo.get("version", 1)
                                                           if repo.get("revision") is None else None,
                                                           repo.get("revision"))
    except Exception as exc:  # noqa: BLE001 - no huggingface_hub: kernels could not fetch either
        return False, f"the cache could not be read ({type(exc).__name__}: {exc})"
    return snap is not None, str(snap) if snap is not None else why


def _pip_resolves(package: str, path: str) -> Any:
    """What `getattr(module, name)` / `resolve_internal_import(module, chained_path=...)` returns for the pip
    package (called only where transformers would import it)."""
    try:
        obj: Any = importlib.import_module(package)
        for i, part in enumerate(path.split(".")):
            nxt = getattr(obj, part, None)
            if nxt is None and i < len(path.split(".")) - 1:
                nxt = importlib.import_module(f"{package}.{'.'.join(path.split('.')[:i + 1])}")
            obj = nxt
            if obj is None:
                return None
        return obj
    except Exception:  # noqa: BLE001 - lazy_load_kernel swallows import errors too
        return None


def _missing_reason(name: str, b: transformers.Binding, env: environment.Environment, available: set[str],
                    m: matrix.Matrix, query: str | None, device: Device) -> tuple[str, str | None] | None:
    """Why lazy_load_kernel leaves `name` None here (reason, fix), or None when it resolves."""
    kernel = b.extra["kernel"]
    check = f"is_{kernel.replace('-', '_')}_available"
    pkg = m.packages.get(b.package) or m.packages.get(m.functions[name].package if name in m.functions else "")
    dist = pkg.install_distribution if pkg else b.package
    if check not in available:
        return (f"transformers {env.transformers}'s lazy_load_kernel('{kernel}') looks for {check}(), which "
                "transformers.utils.import_utils does not define, so the pip package is never imported for this "
                "layer; only a Hub kernel (kernels inside transformers' window) can provide it",
                "pip install 'kernels' inside transformers' window on a machine with an NVIDIA GPU (Hub kernels), "
                "or upgrade transformers to >=5.15 (decorated functions)")
    st = env.packages.get(pkg.name) if pkg else None
    if st is None or not st.installed:
        return (f"{pkg.title if pkg else b.package} is not installed (pip distribution {dist})",
                install_fix(query, dist))
    if gpu_unnamed(device, env):  # a prediction for a GPU not named: the row says so; nothing imported here
        return None
    if not runs_cuda_kernels(device, env):
        return (f"{check}() is false: {no_device_reason(env, pkg, device)}" if pkg else f"{check}() is false",
                "run on a machine with an NVIDIA GPU and a CUDA build of torch")
    if not st.imports or pkg is None:
        return f"{st.distribution} {st.version} is installed but does not import: {st.error}", install_fix(query, dist)
    if _pip_resolves(pkg.name, b.extra["attribute_path"]) is None:
        return (f"{st.distribution} {st.version} has no `{b.extra['attribute_path']}`",
                f"pip install -U {dist}  (kernelcheck install --model {query or 'M'} picks a compatible version)")
    return None


def _torch_path_reason(fn: str, b: transformers.Binding, missing: dict[str, tuple[str, str | None]],
                       env: environment.Environment, m: matrix.Matrix, device: Device) -> tuple[str, str | None]:
    """(reason, fix) for a function whose layer takes its torch path: its own missing kernel, another's, or no GPU."""
    own = missing.get(fn)
    if own is not None:
        return own
    if missing:
        return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not found", next(
            (f for _, f in missing.values() if f), None)
    pkg = m.packages.get(b.package)
    if pkg is not None and gpu_unnamed(device, env):  # the GPU of the prediction is not named
        return unnamed_reason(pkg), unnamed_fix(None)
    reason = no_device_reason(env, pkg, device) if pkg else "no CUDA GPU here"
    return reason, "run on a machine with an NVIDIA GPU and a CUDA build of torch"


def _missing_reasons(result: transformers.BindingResult, env: environment.Environment, available: set[str],
                     m: matrix.Matrix, query: str | None, device: Device) -> dict[str, tuple[str, str | None]]:
    """Why each bound function's pip kernel is not found, for the functions whose kernel is missing."""
    missing: dict[str, tuple[str, str | None]] = {}
    for fn, b in result.bindings.items():
        got = _missing_reason(fn, b, env, available, m, query, device)
        if got is not None:
            missing[fn] = got
    return missing


def _hub_offline_broken(model: models.ResolvedModel, result: transformers.BindingResult,
                        env: environment.Environment, th: TransformersHub, uncached: dict[str, Any],
                        layers: set[str], m: matrix.Matrix, ref: str | None
                        ) -> tuple[list[FunctionStatus], list[Finding]]:
    """All functions broken: transformers fetches Hub kernels at build time, offline, and the cache lacks some."""
    from kernelcheck.integrations import kernels_hub

    tv = env.transformers
    names = ", ".join(f"{r['repo_id']} (lazy_load_kernel('{k}'))" for k, r in uncached.items())
    why = (f"building {model.model_type} raises in {', '.join(sorted(layers))}.__init__: transformers {tv} "
           f"fetches Hub kernels there whenever kernels {env.kernels} is inside its window "
           f"({th.window_text}), USE_HUB_KERNELS is not consulted, and HF_HUB_OFFLINE is set while the cache "
           f"({kernels_hub.cache_dir()}) lacks {names}: get_kernel raises ValueError ('... is not available in "
           "the local cache and Hugging Face Hub is in offline mode'), which lazy_load_kernel does not catch")
    gets = "; ".join(f"get_kernel('{r['repo_id']}', version={r.get('version', 1)})" for r in uncached.values())
    fix = ("prefetch while online, on this image: python -c \"from kernels import get_kernel; " + gets
           + "\" (fills the HF cache for this torch/CUDA); or pip uninstall kernels (transformers then uses "
           "the pip causal-conv1d / mamba-ssm on a CUDA GPU); USE_HUB_KERNELS=0 does not help on this version")
    findings = [Finding("lazy-hub-fetch-offline", Severity.BROKEN, why + ".", fix, ref)]
    statuses: list[FunctionStatus] = []
    for fn, b in result.bindings.items():
        info = m.functions.get(fn)
        statuses.append(FunctionStatus(fn, _dist(m, b, fn), Status.BROKEN, "-", why, fix,
                                       info.phase if info else "", used=True))
    return statuses, findings


def lazy_statuses(model: models.ResolvedModel, result: transformers.BindingResult,
                  env: environment.Environment, mode: str, query: str | None, m: matrix.Matrix, *,
                  device: Device) -> tuple[list[FunctionStatus], list[Finding]]:
    """Each function's status, judged for the verdict's `device` with what is installed."""
    from kernelcheck.integrations.transformers_hub import transformers_hub

    lz = m.transformers.get("lazy_kernels") or {}
    ref = lz.get("reference")
    raises = (lz.get("raises") or {}).get(model.model_type)
    hub_map, available, _ = transformers.lazy_kernel_sources()
    th = transformers_hub(m=m)
    hub_on = bool(env.kernels and th.window and th.window_met)
    tv = env.transformers
    statuses: list[FunctionStatus] = []
    findings: list[Finding] = []
    layers = {b.extra["layer"] for b in result.bindings.values()}
    cfg = model.text_config
    if hub_on:
        repos = {b.extra["kernel"]: hub_map.get(b.extra["kernel"]) for b in result.bindings.values()}
        uncached = {k: r for k, r in repos.items() if r and not _hub_state(r)[0]}
        if uncached and settings.hub_offline():
            return _hub_offline_broken(model, result, env, th, uncached, layers, m, ref)
        findings.append(Finding(
            "lazy-hub-kernels", Severity.WARNING,
            f"transformers {tv} loads {', '.join(sorted(r['repo_id'] for r in repos.values() if r))} from the Hub "
            f"when {', '.join(sorted(layers))} is built (kernels {env.kernels} is inside its window; USE_HUB_KERNELS "
            "is not read there): an offline job needs these builds in its HF cache, and an error other than "
            "FileNotFoundError while fetching crashes the build.",
            "keep the HF cache prefetched for offline jobs (python -c \"from kernels import get_kernel; ...\")", ref))
    missing = {} if hub_on else _missing_reasons(result, env, available, m, query, device)
    cuda = runs_cuda_kernels(device, env) and not gpu_unnamed(device, env)  # judged fast on a named GPU only
    kernels_off = cfg.get("use_mamba_kernels") is False
    for fn, b in result.bindings.items():
        info = m.functions.get(fn)
        phase = info.phase if info else ""
        used = not (mode == Mode.TRAIN and phase == "decode")
        layer, gate = f"{b.extra['layer']}", ", ".join(b.extra["gate"])
        torch_impl = b.implementation
        if kernels_off:
            statuses.append(FunctionStatus(fn, _dist(m, b, fn), Status.FALLBACK, torch_impl,
                                           f"the config sets use_mamba_kernels=False: {layer} runs "
                                           f"{b.extra['torch_path']}", "remove use_mamba_kernels=False from the "
                                           "config (on a machine with the kernels)", phase, used))
            continue
        if not missing and cuda:
            impl = (f"{hub_map.get(b.extra['kernel'], {}).get('repo_id', b.extra['kernel'])} (Hub kernel, "
                    f"{b.extra['attribute_path']})") if hub_on else f"{b.package}.{b.extra['attribute_path']}"
            statuses.append(FunctionStatus(fn, _dist(m, b, fn), Status.FAST, impl, None, None, phase, used))
            continue
        reason, cure = _torch_path_reason(fn, b, missing, env, m, device)
        gate_txt = (f"transformers {tv} resolves the kernels in {layer}.__init__ (lazy_load_kernel) and its forward "
                    f"takes the fused path only when all of ({gate}) are found and the weights are on CUDA")
        if raises and cfg.get(raises["config_field"], raises["default"]):
            statuses.append(FunctionStatus(
                fn, _dist(m, b, fn), Status.BROKEN, "-",
                f"{gate_txt}, and otherwise raises ({raises['error']}) because {raises['config_field']} is "
                f"{raises['default']} by default: here {reason}",
                (cure + "; " if cure else "") + f"or set {raises['config_field']}=False in the config (torch path)",
                phase, used=True))
            continue
        status = Status.UNSUPPORTED if not missing and not cuda else Status.FALLBACK
        statuses.append(FunctionStatus(fn, _dist(m, b, fn), status, torch_impl,
                                       f"{gate_txt}; otherwise the whole layer runs {b.extra['torch_path']}: here "
                                       f"{reason}", cure, phase, used))
    if raises and any(s.status == Status.BROKEN for s in statuses):
        findings.append(Finding("lazy-kernels-raise", Severity.BROKEN,
                                f"{model.model_type}'s forward raises '{raises['error']}' here: see its functions.",
                                f"set {raises['config_field']}=False in the config, or run where the kernels load",
                                raises["reference"]))
    return statuses, findings


def _dist(m: matrix.Matrix, b: transformers.Binding, fn: str) -> str:
    pkg = m.packages.get(b.package) or m.packages.get(m.functions[fn].package if fn in m.functions else "")
    return pkg.install_distribution if pkg else b.package
