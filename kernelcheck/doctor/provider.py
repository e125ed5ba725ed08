"""What runs for each function in the job, and the rules of that code.

- `apply_builds` (before the Hub check): each function's pip package as installed (distribution, version, the
  backend fla's own dispatch picks for it) is the evidence core/decide.py turns into the function's `provider`:
  "pip:fla-core 0.6.0 / fwd Triton, bwd TileLang", "pip:causal-conv1d 1.7.0", "torch". The Hub check
  (hub/check.py) then replaces it with "hub:<repo>@vN (variant ...)" for every function a Hub build replaces.
- `apply_hub` (after it): where a Hub fla build replaces pip's fla (transformers 5.25's default), the fla that runs is
  that build, its own snapshot of fla's source. Its dispatch is read from the cached build's files (or, not on disk,
  the layout matrix/fla_dispatch.toml records for that Hub version, said as a finding) and judged as the code that
  runs; the pip fla's findings about the functions the Hub replaces stay in the report as info, not in effect.
  kernels' own switches and limits come here too: UNSTABLE_KERNELS_ALL_LATEST, variant names the installed kernels
  cannot read.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from kernelcheck.core import decide, environment, matrix, settings
from kernelcheck.core.status import Finding, FunctionStatus, Mode, Severity, Status
from kernelcheck.integrations import fla_dispatch
from kernelcheck.report.model import Report
from kernelcheck.report.sections import BackendsSection


def backend_words(ops: tuple[fla_dispatch.OpBackend, ...] | list[fla_dispatch.OpBackend], fn: str) -> str:
    """The backend(s) of `fn`'s passes in a few words: "Triton", or "fwd Triton, bwd TileLang" when they differ."""
    mine = [op for op in ops if op.function == fn]
    names = [fla_dispatch.BACKEND_NAMES.get(op.backend, op.backend) for op in mine]
    if not names:
        return ""
    if len(set(names)) == 1:
        return names[0]
    short = {"forward": "fwd", "backward": "bwd"}
    return ", ".join(f"{short.get(op.phase, op.phase)} {n}" for op, n in zip(mine, names, strict=True))


def builds(functions: list[FunctionStatus], env: environment.Environment, ops: tuple[fla_dispatch.OpBackend, ...],
           m: matrix.Matrix) -> dict[str, decide.Build]:
    """Each function's pip package as installed here (`decide.TORCH` for one bound to torch or to no package)."""
    by_dist = {d: p for p in m.packages.values() for d in p.distributions}
    out: dict[str, decide.Build] = {}
    for fs in functions:
        pkg = by_dist.get(fs.package) or m.packages.get(fs.package)
        st = env.packages.get(pkg.name) if pkg is not None else None
        if pkg is None or fs.package == "torch" or (
                fs.status == Status.UNSUPPORTED and not fs.implementation.startswith(f"{pkg.name}.")):
            out[fs.name] = decide.TORCH  # unsupported with the torch function bound: 5.25's per-call device check
            continue
        dist = (st.distribution if st is not None and st.distribution else None) or fs.package
        version = st.version if st is not None and st.installed else None
        out[fs.name] = decide.Build(dist, version, backend_words(ops, fs.name))
    return out


def apply_builds(report: Report, env: environment.Environment, m: matrix.Matrix) -> None:
    """Decide every function's provider from its pip build (the Hub check may replace it after)."""
    ops = report.backends.ops if report.backends is not None else ()
    got = builds(report.functions, env, ops, m)
    report.functions = [decide.decide(fs, build=got[fs.name]) for fs in report.functions]


# -- the Hub fla --------------------------------------------------------------------------------------------------
_FIX = {
    "jit-no-nvcc": "put the CUDA toolkit in the runtime image (nvcc on PATH or in CUDA_HOME, e.g. a CUDA -devel base "
                   "image), or run the job with USE_HUB_KERNELS=0 so the pip packages run (then run doctor again: "
                   "pip's fla-core >= 0.6.0 checks for nvcc before it picks TileLang)",
    "jit-pip-nvcc": "put the CUDA toolkit in the runtime image (nvcc on PATH or in CUDA_HOME, e.g. a CUDA -devel "
                    "base image): pip's nvidia-cuda-nvcc alone does not compile TileLang's kernels",
    "jit-cuda-home-no-nvcc": "unset CUDA_HOME and CUDA_PATH in the job, or point CUDA_HOME at the toolkit that holds "
                             "bin/nvcc (e.g. export CUDA_HOME=/usr/local/cuda)",
    "tilelang-import-fails": "pip install the apache-tvm-ffi version tilelang declares (pip show tilelang; e.g. "
                             "pip install 'apache-tvm-ffi>=0.1.11,<0.1.13' for tilelang 0.1.15)",
    "raises-640": "pip install tilelang with the CUDA toolkit in the runtime image (the Hub fla then runs that "
                  "backward on TileLang), or allow a triton change (triton>=3.7.1 with a matching torch)",
    "wrong-grads-640": "pip install tilelang with the CUDA toolkit in the runtime image, or allow a triton change "
                       "(triton>=3.7.1 with a matching torch)",
}


def _build_dir(report: Report, spec: str) -> tuple[Path | None, str | None]:
    """(the chosen build's folder on disk, its variant) for the Hub repository `spec` the section resolved."""
    hub = report.hub
    res = next((r for r in hub.repos if r.spec == spec), None) if hub is not None else None
    if res is None or not res.chosen:
        return None, None
    if res.source in ("hf-cache", "LOCAL_KERNELS") and res.location:
        return Path(res.location) / "build" / res.chosen, res.chosen
    return None, res.chosen


def _hub_fla_rows(report: Report, *, m: matrix.Matrix) -> dict[str, list[str]]:
    """{repo spec: the functions a Hub fla build replaces}."""
    repos = fla_dispatch.hub_repos(m=m)
    replaced = {fs.name for fs in report.functions if (fs.provider or "").startswith("hub:")}
    out: dict[str, list[str]] = {}
    for row in report.hub.names if report.hub is not None else []:
        if row.repo and row.repo.split("@")[0] in repos and row.name in replaced:
            out.setdefault(row.repo, []).append(row.name)
    return out


def _superseded(findings: list[Finding], replaced: set[str], specs: str) -> list[Finding]:
    """The pip packages' findings about functions a Hub build replaces: kept, as info, not in effect."""
    out = []
    for f in findings:
        if f.functions and set(f.functions) <= replaced and not f.id.startswith(("hub-", "compile-", "jit-")):
            f = replace(f, severity=Severity.INFO,
                        message=f"not in effect: {', '.join(f.functions)} run the Hub build ({specs}), not the pip "
                                f"package this is about. {f.message}")
        out.append(f)
    return out


def apply_hub(report: Report, env: environment.Environment, mode: str, query: str | None, *,
              m: matrix.Matrix) -> None:
    """Judge the Hub fla builds that replace pip's fla as the code that runs (see the module text)."""
    hub = report.hub
    if hub is None or not hub.used:
        return
    replaced = {fs.name for fs in report.functions if (fs.provider or "").startswith("hub:")}
    if replaced:
        specs = ", ".join(sorted({r.repo for r in hub.names if r.repo and r.name in replaced}))
        report.findings = _superseded(report.findings, replaced, specs)
    for spec, fns in _hub_fla_rows(report, m=m).items():
        _judge_hub_fla(report, env, mode, query, spec, tuple(fns), m=m)
    report.findings.extend(kernels_findings(report, dict(os.environ)))


def _judge_hub_fla(report: Report, env: environment.Environment, mode: str, query: str | None, spec: str,
                   fns: tuple[str, ...], *, m: matrix.Matrix) -> None:
    repo, _, ver = spec.partition("@v")
    build, variant = _build_dir(report, spec)
    lay = fla_dispatch.hub_layout(repo, int(ver) if ver.isdigit() else None, build, m=m)
    if lay.origin == "hub-table" and not lay.problems:
        report.findings.append(Finding(
            "hub-fla-layout-assumed", Severity.WARNING,
            f"{spec}'s build is not on disk here, so its own dispatch code was not read: which backend runs "
            f"{', '.join(fns)} is judged from the layout recorded for that Hub version ({lay.assumed}).",
            f"kernelcheck hub --model {query or 'M'} --prefetch  (doctor then reads the build's own files)",
            lay.reference, fns))
    if not lay.known:
        report.findings.append(Finding(
            "fla-dispatch-unknown", Severity.WARNING,
            f"{spec}'s backend dispatch does not read as any layout kernelcheck knows ({'; '.join(lay.problems)}): "
            f"which backend runs {', '.join(fns)} is not known.",
            f"kernelcheck verify --model {query or 'M'} --mode train  (shows the kernels that really ran)",
            lay.reference, fns))
        return
    ops = [op for op in fla_dispatch.decide(lay, env, fns) if mode == Mode.TRAIN or op.phase == "forward"]
    if env.gpus and (report.device is None or report.device.type == "cuda"):  # a GPU here or named (--arch)
        report.backends = BackendsSection(lay.version, lay.origin, lay.reference, env.nvcc, env.nvcc_path,
                                          env.nvcc_source, {k: v for k, v in env.env_vars.items()
                                                            if k in fla_dispatch.SWITCHES}, tuple(ops))
    hits: list[decide.RuleEvidence] = []
    for op in ops:
        if op.outcome in ("ok", "unknown"):
            continue
        title = f"the Hub fla ({spec}) fails in {op.function}'s {op.phase}"
        msg = (f"{op.reason}. The job runs {spec} (variant {variant}) in place of pip's fla, and that build's "
               f"{fla_dispatch.BACKEND_NAMES.get(op.backend, op.backend)} path is what fails"
               + ("" if lay.origin == "hub-cache" else " (judged from its recorded layout, not its files)"))
        fix = _FIX.get(op.outcome)
        report.findings.append(Finding("hub-fla-backend-fails", Severity.BROKEN, msg, fix, lay.reference,
                                       (op.function,)))
        hits.append(decide.RuleEvidence("hub-fla-backend-fails", Severity.BROKEN, title, msg, fix, (op.function,)))
    rows = {r.name: r for r in report.hub.names} if report.hub is not None else {}
    out = []
    for fs in report.functions:
        row = rows.get(fs.name)
        if fs.name in fns and row is not None:
            ev = decide.HubEvidence(fs.name, fs.implementation, spec, variant or "", backend_words(ops, fs.name))
            fs = decide.decide(decide.decide(fs, hub=ev), rules=hits)
        out.append(fs)
    report.functions = out


# -- kernels' own switches and limits ------------------------------------------------------------------------------
_NEW_NAMES = re.compile(r"^torch-\d+\.\d+-.*-cpython-\d+\.\d+")  # kernels 0.19's variant names


def kernels_findings(report: Report, environ: dict[str, str]) -> list[Finding]:
    """UNSTABLE_KERNELS_ALL_LATEST set for a job that loads Hub kernels; variant names this kernels cannot read."""
    out: list[Finding] = []
    latest = environ.get("UNSTABLE_KERNELS_ALL_LATEST", "")
    if latest.strip().upper() in settings.YES:
        out.append(Finding(
            "hub-all-latest", Severity.WARNING,
            f"UNSTABLE_KERNELS_ALL_LATEST={latest}: kernels loads the newest numbered version of every Hub repository, "
            "overriding the version transformers asks for and any lockfile pin; the builds named under hub are "
            "what the requested versions give, not necessarily what loads.",
            "unset UNSTABLE_KERNELS_ALL_LATEST for the job (pin with kernelcheck hub --model M --lock instead)",
            "kernels _internals/load.py _use_latest_kernels, resolver.py LatestHubResolver"))
    kernels = environment.dist_version("kernels")
    for res in report.hub.repos if report.hub is not None else []:
        unread = unreadable_variants(res.location if res.source == "hf-cache" else None,
                                     [d.variant for d in res.decisions], kernels)
        if unread:
            out.append(Finding(
                "hub-variant-names-unreadable", Severity.WARNING,
                f"{res.spec}: kernels {kernels} cannot read the name of {len(unread)} build variant(s) "
                f"({', '.join(unread[:3])}): they are kernels 0.19's naming, which older clients misread and "
                "reject, so a build that fits this machine may be passed over.",
                "pip install a kernels release that reads them (>= 0.19, inside transformers' window)",
                "kernels 0.19 variants (torch-<M.m>-cxx11-cuda-<X.Y>-cpython-<X.Y>-abi3-...); measured with kernels "
                "0.18.3 on the CPU"))
    return out


def unreadable_variants(snapshot: str | None, listed: list[str], kernels: str | None) -> list[str]:
    """Build folders kernels did not list (on disk but not parsed), and, for a kernels older than 0.19, listed
    names in 0.19's scheme (parsed wrongly and rejected)."""
    from kernelcheck.core.rules import version_in

    on_disk: list[str] = []
    if snapshot:
        build = Path(snapshot) / "build"
        on_disk = sorted(p.name for p in build.iterdir() if p.is_dir()) if build.is_dir() else []
    missing = [v for v in on_disk if v not in listed and not v.startswith(".")]
    old = bool(kernels) and version_in(kernels, "<0.19")
    misread = [v for v in listed if old and _NEW_NAMES.match(v)]
    return sorted(set(missing) | set(misread))


# -- torch.compile, as far as it is known without running ------------------------------------------------------------
_FLA_DISTS = ("pip:fla-core", "pip:flash-linear-attention")


def compile_findings(report: Report, query: str | None, *, m: matrix.Matrix) -> list[Finding]:
    """What a job that compiles the model meets, where the code that runs says it without running: the installed
    fla wraps the ops it dispatches in torch.compiler.disable (a graph break at every call, inside the decoder loop);
    else, where an fla build runs, a pointer to verify --compile."""
    used = [fs for fs in report.functions if fs.used and fs.provider]
    pip_fla = tuple(fs.name for fs in used if str(fs.provider).startswith(_FLA_DISTS))
    hub_fla = tuple(fs.name for fs in used if any(str(fs.provider).startswith(f"hub:{r}@")
                                                  for r in fla_dispatch.hub_repos(m=m)))
    wrap = fla_dispatch.compile_wrap(pip_fla) if pip_fla else None
    verify = f"kernelcheck verify --model {query or 'M'} --compile"
    if wrap is not None:
        from kernelcheck.core.environment import dist_version

        torch_v = dist_version("torch")
        how = {fn: kinds for fn, kinds in wrap.kinds}
        own = [fn for fn in wrap.functions if "decorator" in how.get(fn, ())]
        said = " and ".join(([f"its own @torch.compiler.disable ({', '.join(own)})"] if own else [])
                            + (["its backend dispatch's torch.compiler.disable(wrapper)"]
                               if any("dispatch" in k for k in how.values()) else []))
        fix = ("FLA_DISABLE_BACKEND_DISPATCH=1 removes the wrapper (and fla's TileLang/FlashQLA backends with it); or "
               "wrap the ops in torch.library.custom_op; or compile each decoder layer (layer.compile())"
               if wrap.switch else
               f"wrap {', '.join(wrap.functions)} in a torch.library.custom_op (then Dynamo keeps the call in the "
               "graph), or compile each decoder layer (layer.compile()) so a break stays inside one layer"
               + ("; FLA_DISABLE_BACKEND_DISPATCH=1 does not remove the op's own decorator" if own else ""))
        return [Finding(
            "compile-graph-breaks-static", Severity.INFO,
            f"the installed fla wraps {', '.join(wrap.functions)} in {said} (read from its source): Dynamo "
            f"(torch {torch_v or 'not installed'}) does not trace into such a function, so a job that compiles the "
            "model breaks its graph at each call, inside the decoder loop. Whether Dynamo then runs the decoder loop "
            f"(every layer) eagerly depends on torch (axolotl#3734); {verify} measures both here.",
            fix, wrap.reference, wrap.functions)]
    if hub_fla or pip_fla:
        fns = hub_fla or pip_fla
        return [Finding(
            "compile-unknown", Severity.INFO,
            f"whether torch.compile runs {', '.join(fns)} (and the decoder loop around them) compiled or eagerly is "
            f"not known without running them: {verify} shows the graph breaks and what runs eagerly.",
            None, None, fns)]
    return []


def verify_hub_note(report: Report) -> list[Finding]:
    """verify builds the layers from the config, which loads no Hub kernel: where the job's load replaces functions
    with Hub builds, the live evidence is of the path below them, and this says so."""
    hub = [fs.name for fs in report.functions if fs.used and str(fs.provider or "").startswith("hub:")]
    if not hub:
        return []
    return [Finding(
        "verify-hub-not-applied", Severity.INFO,
        f"the job's from_pretrained replaces {', '.join(hub)} with Hub builds (see each function's provider), but "
        "verify builds the layers from the config, which loads no Hub kernel: its live evidence is of the pip or "
        "torch path below them.",
        "after the job's own load, kernelcheck.applied_kernels(model) says which kernel replaced which layer and "
        "function (kernels' get_kernelized_layers where kernels has it)", None, tuple(hub))]
