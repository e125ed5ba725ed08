"""Planning a compiled CUDA extension (causal-conv1d and its CachedWheels kin): keep what fits, else a
wheelhouse wheel (labelled, or unlabelled and verified by its GPU code and a trial import), else the
upstream release wheel, else an arch-targeted source build; every loser listed with its reason."""

from __future__ import annotations

from packaging.version import Version

from kernelcheck.core import gpu, matrix
from kernelcheck.core.environment import Environment
from kernelcheck.core.plan_step import Rejected, RejectKind, Step, StepKind
from kernelcheck.core.status import Severity
from kernelcheck.install import build, wheels
from kernelcheck.install.plan_types import Candidates, Options, pip_cmd, sm_tag, version_text


def plan_extension(pkg: matrix.PackageInfo, env: Environment, opts: Options, cands: Candidates,
                    target: wheels.WheelFit) -> list[Step]:
    dist = pkg.install_distribution
    st = env.packages.get(pkg.name)
    torch_v = env.torch.version if env.torch else "(absent)"
    if env.torch is None or not env.torch.cuda:
        return [Step(dist, "refuse", "-", dist,
                     f"torch {torch_v} is a CPU build (torch.version.cuda is None): {pkg.title}'s CUDA extension "
                     f"`{pkg.extension}` can neither be built against it nor loaded by it, and no wheel can fit. "
                     "kernelcheck never changes torch: install a CUDA build of torch yourself, then rerun",
                     import_name=pkg.name, severity=Severity.FALLBACK, kind=StepKind.CPU_TORCH)]
    if not opts.arches:
        return [Step(dist, "refuse", "-", dist,
                     f"no GPU is visible and no --arch was given, so no GPU architecture can be chosen for "
                     f"{pkg.title}: pass the target GPU's compute capability, e.g. --arch 9.0 for H100/H200",
                     import_name=pkg.name, severity=Severity.FALLBACK, kind=StepKind.NO_GPU_ARCH)]
    if st and st.installed and st.imports and opts.source == "auto" and st.extension_path:
        try:
            with open(st.extension_path, "rb") as fh:
                got = wheels.so_arches(fh.read())
        except OSError:
            got = ()
        missing = [a for a in opts.arches if gpu.arch_serves(got, a) != "sass"]
        if not missing:
            return [Step(dist, "keep", "installed", f"{dist}=={st.version}",
                         f"{dist} {st.version} is installed, imports, and its extension carries {', '.join(got)} "
                         f"for {sm_tag(opts.arches)}", import_name=pkg.name, arches=got, kind=StepKind.INSTALLED)]
    rejected: list[Rejected] = []
    allowed = {"auto": ("wheelhouse", "release", "build"), "wheelhouse": ("wheelhouse",),
               "release": ("release",), "build": ("build",), "pypi": ("build",), "hub": ()}[opts.source]
    if opts.source == "hub":
        rejected.append(Rejected("hub", "Kernel Hub builds are loaded by transformers' `kernels` integration, "
                                 "not installed with pip: see `kernelcheck doctor` (hub section)",
                                 kind=RejectKind.HUB_NOT_PIP))
    for way in (_wheelhouse_step, _release_step, _build_step):
        step = way(pkg, env, opts, cands, target, allowed, rejected)
        if step is not None:
            return [step]
    return [Step(dist, "refuse", "-", dist, f"no way to install {pkg.title} for torch {target.torch_mm} + CUDA "
                 f"{target.cuda_major} + {target.python_tag} + {sm_tag(opts.arches)} was found; every candidate "
                 "is listed with its reason", rejected=tuple(rejected), import_name=pkg.name,
                 severity=Severity.FALLBACK, kind=StepKind.NO_CANDIDATE)]


def _wheelhouse_step(pkg: matrix.PackageInfo, env: Environment, opts: Options, cands: Candidates,
                     target: wheels.WheelFit, allowed: tuple[str, ...], rejected: list[Rejected]) -> Step | None:
    dist = pkg.install_distribution
    best: tuple[wheels.WheelInfo, wheels.Decision] | None = None
    for w in sorted((w for w in cands.wheels if w.name.name == dist),
                    key=lambda w: version_text(w.name.public_version) or Version("0"), reverse=True):
        d = wheels.match(w, target, expected_sha256=(w.sidecar or {}).get("sha256"), extension=pkg.extension,
                         trial=cands.trials.get(w.path))
        if "wheelhouse" not in allowed:
            rejected.append(Rejected(f"{w.name.filename} (wheelhouse)", f"--source {opts.source}",
                                     kind=RejectKind.SOURCE_EXCLUDED))
        elif not d.accepted:
            assert d.kind is not None  # every rejection has its kind (wheels.Decision)
            rejected.append(Rejected(f"{w.name.filename} (wheelhouse)", d.reason, kind=d.kind))
        elif best is None:
            best = (w, d)
        else:
            rejected.append(Rejected(f"{w.name.filename} (wheelhouse)", "a newer matching wheel was chosen",
                                     kind=RejectKind.NEWER_CHOSEN))
    if best is not None:
        w, d = best
        built = " (built by kernelcheck, reused: no rebuild)" if (w.sidecar or {}).get("built_by") else ""
        return Step(dist, "install", "wheelhouse", f"{dist}=={w.name.version}",
                    f"matching wheel in the wheelhouse{built}: {d.reason}", pip_cmd(w.path, opts),
                    tuple(rejected), w.path, w.sha256, tuple(sorted({a for v in w.so_arches.values() for a in v})),
                    pkg.name, kind=StepKind.WHEELHOUSE_WHEEL)
    if not any(w.name.name == dist for w in cands.wheels) and "wheelhouse" in allowed:
        rejected.append(Rejected("wheelhouse", f"no {dist} wheel in {opts.wheelhouse or 'the wheelhouse'}",
                                 kind=RejectKind.NO_WHEEL))
    return None


def _release_step(pkg: matrix.PackageInfo, env: Environment, opts: Options, cands: Candidates,
                  target: wheels.WheelFit, allowed: tuple[str, ...], rejected: list[Rejected]) -> Step | None:
    if cands.release_url and "release" in allowed:
        name = cands.release_url.rsplit("/", 1)[-1]
        if cands.release_status == "exists":
            return Step(pkg.install_distribution, "install", "release", name,
                        "upstream release wheel for this torch/CUDA/cxx11abi/Python exists; it is downloaded "
                        "into the wheelhouse and its GPU code checked before install",
                        pip_cmd(cands.release_url, opts), tuple(rejected), cands.release_url, "", (), pkg.name,
                        kind=StepKind.RELEASE_WHEEL)
        rejected.append(Rejected(f"release {name}", cands.release_status or "unknown",
                                 kind=cands.release_kind or RejectKind.RELEASE_UNCHECKED))
    elif "release" in allowed and pkg.release_wheel:
        rejected.append(Rejected("release", cands.release_status or "package version unknown: no URL to check",
                                 kind=cands.release_kind or RejectKind.RELEASE_UNCHECKED))
    return None


def _build_step(pkg: matrix.PackageInfo, env: Environment, opts: Options, cands: Candidates,
                target: wheels.WheelFit, allowed: tuple[str, ...], rejected: list[Rejected]) -> Step | None:
    if "build" not in allowed:
        return None
    blocker = _build_blockers(pkg, env, opts, cands, target)
    if blocker:
        rejected.append(Rejected(f"build {cands.sdist.rsplit('/', 1)[-1] if cands.sdist else 'from sdist'}",
                                 blocker[1], kind=blocker[0]))
        return None
    dist = pkg.install_distribution
    sdist = cands.sdist or ""
    name = sdist.rsplit("/", 1)[-1]
    overlay = ", ".join(f"{t} ({w})" for t, w in sorted(cands.overlay.items()))
    tools = f"; build tools {overlay} go into a throwaway build overlay, never into this environment" \
        if overlay else ""
    ninja = "" if cands.build_tools.get("ninja") or "ninja" in cands.overlay else \
        " (ninja is missing: the compile runs serially)"
    std = " -std=c++20 (torch >= 2.14 headers need it)" if version_text(target.torch_mm + ".0") and \
        (version_text(target.torch_mm + ".0") or Version("0")) >= Version("2.14") else ""
    switches = " ".join(f"{k}={v}" for k, v in build.switches(pkg.env_prefix, pkg.build_env).items())
    return Step(dist, "build", "build", name.removesuffix(".tar.gz"),
                f"no matching wheel: build {name} ({cands.sdist_origin}) for {sm_tag(opts.arches)} only "
                f"(from {opts.arch_origin}) against the installed torch {env.torch.version if env.torch else '?'} "
                f"with nvcc {env.nvcc}, --no-build-isolation; the wheel is kept in the wheelhouse for reuse"
                f"{tools}{ninja}",
                f"{switches} MAX_JOBS=<cores/memory> "
                f"pip wheel --no-build-isolation --no-deps {name}  (-gencode rewritten to "
                f"{sm_tag(opts.arches)}{std})", tuple(rejected), sdist, "",
                tuple(f"sm_{gpu.cap_to_sm(a)}" for a in opts.arches), pkg.name, kind=StepKind.SOURCE_BUILD)


def _build_blockers(pkg: matrix.PackageInfo, env: Environment, opts: Options, cands: Candidates,
                    target: wheels.WheelFit) -> tuple[RejectKind, str] | None:
    if not cands.sdist:
        return RejectKind.NO_SDIST, (cands.sdist_error
                                     or "no sdist: pass --sdist FILE or put the .tar.gz in the wheelhouse")
    if not env.nvcc:
        return RejectKind.NO_NVCC, "nvcc not found (set CUDA_HOME or put nvcc on PATH; a -devel CUDA image has it)"
    nv_major = int(env.nvcc.split(".")[0])
    if target.cuda_major is not None and nv_major != target.cuda_major:
        built = env.torch.cuda if env.torch else "?"
        return RejectKind.NVCC_CUDA_MAJOR, (f"nvcc {env.nvcc} is CUDA {nv_major} but torch was built with CUDA {built}:"
                " torch.utils.cpp_extension refuses a CUDA major mismatch; point CUDA_HOME at a CUDA "
                f"{target.cuda_major}.x toolkit")
    if cands.nvcc_arches:
        bad = [a for a in opts.arches if f"compute_{gpu.cap_to_sm(a)}" not in cands.nvcc_arches]
        if bad:
            return RejectKind.NVCC_ARCH, (f"nvcc {env.nvcc} cannot target {sm_tag(tuple(bad))} "
                                          f"(it lists {cands.nvcc_arches[0]}..)")
    missing = [t for t in ("setuptools", "wheel") if not cands.build_tools.get(t, True) and t not in cands.overlay]
    if missing:
        return RejectKind.BUILD_TOOLS, (f"{' and '.join(missing)} not importable here and not in the wheelhouse"
                + (" (offline)" if opts.offline else " or on PyPI") + f": {pkg.title}'s setup.py imports them and "
                f"the build runs without isolation; put their wheels in {opts.wheelhouse or 'the wheelhouse'} "
                "for the build overlay")
    return None


