"""Find the candidates a plan chooses from: wheelhouse files, PyPI, the upstream release wheel, sdists.

This is the only part of planning that touches the disk and the network; `plan.make_plan` stays pure.
Network use is explicit: `offline` skips PyPI and the release server, and every skipped or failed
lookup becomes a rejected candidate with its reason (offline is a reason, not a crash).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernelcheck.core import lifeline, matrix, settings
from kernelcheck.core.environment import Environment, dist_version
from kernelcheck.core.plan_step import RejectKind
from kernelcheck.install import build, wheels
from kernelcheck.install.plan import fix_wanted
from kernelcheck.install.plan_types import PINNED, Candidates, Options, wheel_fit
from kernelcheck.install.trial import trial_import  # re-exported
from kernelcheck.report.progress import working

_SDIST_RE = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-]*)\.tar\.gz$")
PIP_NET = lifeline.PIP_NET


def default_wheelhouse() -> Path:
    """$KERNELCHECK_HOME/wheelhouse, else ~/.cache/kernelcheck/wheelhouse."""
    home = settings.variable("KERNELCHECK_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "kernelcheck"
    return base / "wheelhouse"


def scan_wheelhouse(wheelhouse: Path) -> tuple[dict[str, list[wheels.WheelInfo]], dict[str, list[Path]]]:
    """Wheels (inspected, with kernelcheck sidecars) and sdists in the wheelhouse, by distribution."""
    whl: dict[str, list[wheels.WheelInfo]] = {}
    sd: dict[str, list[Path]] = {}
    if not wheelhouse.is_dir():
        return whl, sd
    for p in sorted(wheelhouse.iterdir()):
        if p.name.startswith("."):
            continue
        if p.suffix == ".whl":
            info = wheels.inspect_wheel(p, build.read_sidecar(p))
            if info is not None:
                whl.setdefault(info.name.name, []).append(info)
        elif p.name.endswith(".tar.gz"):
            m = _SDIST_RE.match(p.name)
            if m:
                sd.setdefault(str(canonicalize_name(m["name"])), []).append(p)
    return whl, sd


def _constraints_file(env: Environment) -> Path:
    """The pins every pip call carries (torch, triton, transformers as installed), written to a temporary file
    that the caller removes (`gather` holds it in its context for the pip calls it makes)."""
    from kernelcheck.install.apply import constraints_text

    fd, name = tempfile.mkstemp(prefix="kernelcheck-constraints-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(constraints_text(env, frozenset()))
    return Path(name)


def _pip_download(args: list[str], dest: Path, constraints: Path | None,
                  env_extra: dict[str, str] | None = None) -> tuple[Path | None, str]:
    """Run `pip download` with the `constraints` file's pins; (the new file, "") or (None, the reason in one line)."""
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(env_extra or {})
    pins = ["-c", str(constraints)] if constraints else []
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", *PIP_NET,
           *pins, "-d", str(dest), *args]
    try:
        with working(f"kernelcheck install: pip download {' '.join(a for a in args if not a.startswith('-'))} "
                     f"into {dest}", announce=True):
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                                 preexec_fn=lifeline.preexec())
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"pip download failed: {exc}"
    saved = re.findall(r"(?:Saved|File was already downloaded) (\S+)", res.stdout)
    if res.returncode != 0 or not saved:
        err = [ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip().startswith("ERROR")]
        return None, (err[0] if err else f"pip download exited {res.returncode}")[:300]
    path = Path(saved[-1])
    if not path.is_absolute():
        path = dest / path.name
    return path, ""


_RELEASE_TIMEOUT_S = 15


def _release_status(url: str, offline: bool) -> tuple[str, RejectKind | None]:
    """What the release server says of the wheel's URL, and why it is not taken (None: it exists)."""
    if offline:
        return "skipped: offline (--offline); the release server was not asked", RejectKind.RELEASE_UNCHECKED
    try:
        import requests

        r = requests.head(url, allow_redirects=True, timeout=_RELEASE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - no network is a reason, not a crash
        from kernelcheck.install.networds import unreachable

        return f"unreachable: {unreachable(url, exc, _RELEASE_TIMEOUT_S)}", RejectKind.RELEASE_UNREACHABLE
    if r.status_code == 200:
        return "exists", None
    if r.status_code == 404:
        return ("missing: upstream publishes no wheel for this torch/CUDA/cxx11abi/Python (HTTP 404)",
                RejectKind.RELEASE_MISSING)
    return f"unreachable: HTTP {r.status_code}", RejectKind.RELEASE_UNREACHABLE


def gather(env: Environment, packages: tuple[str, ...], opts: Options, wheelhouse: Path,
           sdist: Path | None = None, versions: dict[str, str] | None = None,
           downloads: Path | None = None, *, m: matrix.Matrix) -> dict[str, Candidates]:
    """Candidates for each needed package (import names), its dependencies and offered fixes. `downloads`: where
    pip downloads the wheels it inspects (a dry run's temporary folder), instead of the wheelhouse. `m`: the
    matrix the install decides on."""
    pins = _constraints_file(env)
    ctx = _Ctx(env, opts, wheelhouse, versions or {}, *scan_wheelhouse(wheelhouse), downloads=downloads,
               constraints=pins)
    found: dict[str, Candidates] = {}
    try:
        for name in packages:
            pkg = m.packages[name]
            if pkg.kind == "triton":
                _gather_pure(ctx, pkg, m, found)
            elif pkg.kind == "cuda-extension":
                found[pkg.install_distribution] = _gather_extension(ctx, pkg, sdist)
        for extra in opts.with_packages:
            if extra not in found:
                found[extra] = _fix_candidates(ctx, extra, extra, None)
    finally:
        pins.unlink(missing_ok=True)
    return found


_Item = TypeVar("_Item", wheels.WheelInfo, Path)  # a wheel in the wheelhouse, or an sdist's path


@dataclass
class _Ctx:
    env: Environment
    opts: Options
    wheelhouse: Path
    versions: dict[str, str]
    whl: dict[str, list[wheels.WheelInfo]]
    sdists: dict[str, list[Path]]
    downloads: Path | None = None
    constraints: Path | None = None  # the pins file every pip call of this gather carries (_constraints_file)

    @property
    def dl_dir(self) -> Path:
        if self.downloads is not None:
            return self.downloads
        can_write = os.access(self.wheelhouse, os.W_OK) if self.wheelhouse.exists() else False
        return self.wheelhouse if can_write else Path(tempfile.gettempdir()) / "kernelcheck-downloads"

    def pinned_version(self, dist: str, items: list[_Item]) -> list[_Item]:
        want = self.versions.get(dist)
        if not want:
            return items
        return [w for w in items if (w.name.public_version if isinstance(w, wheels.WheelInfo)
                                     else getattr(_SDIST_RE.match(w.name), "group", lambda _: "")("version"))
                == want]


def _gather_pure(ctx: _Ctx, pkg: matrix.PackageInfo, m: matrix.Matrix, found: dict[str, Candidates]) -> None:
    env, opts, dist = ctx.env, ctx.opts, pkg.install_distribution
    own = ctx.pinned_version(dist, ctx.whl.get(dist, []))
    c = Candidates(wheels=tuple(own))
    cuda_torch = bool(env.torch and env.torch.cuda)  # a CPU torch is refused: no download for it
    if opts.source in ("auto", "pypi", "build", "release") and not opts.offline and cuda_torch:
        spec = f"{dist}=={ctx.versions[dist]}" if dist in ctx.versions else dist
        path, err = _pip_download(["--only-binary", ":all:", spec], ctx.dl_dir, ctx.constraints)
        info = wheels.inspect_wheel(path) if path else None
        c = replace(c, pypi_wheel=info, pypi_error=None if info else f"PyPI: {err}",
                    wheels=tuple(w for w in own if not info or w.path != info.path))
    elif opts.offline:
        c = replace(c, pypi_error="skipped: offline (--offline)")
    found[dist] = c
    _gather_dependencies(ctx, dist, c, found)
    for rule in m.breakages:
        for rem in rule.remedies:
            p = rem["package"]
            if p in found or rem["kind"] == "image":  # an image's part (the CUDA toolkit): nothing to gather
                continue
            if rem["kind"] == "add" and fix_wanted(p, opts) and cuda_torch:
                found[p] = _fix_candidates(ctx, p, rem["spec"], rem.get("window"))
            else:
                wanted = p in opts.with_packages or (rem["kind"] == "change" and p in opts.allow_change)
                found[p] = _pure_candidates(p, rem["spec"], ctx, fetch=wanted)


def _gather_dependencies(ctx: _Ctx, dist: str, c: Candidates, found: dict[str, Candidates]) -> None:
    """The unmet requirements of every candidate wheel of `dist` (einops ...), from the wheelhouse or PyPI."""
    for w in (*c.wheels, *((c.pypi_wheel,) if c.pypi_wheel else ())):
        for r in wheels.requirements(w, extras=("cuda",)):
            dep = str(canonicalize_name(r.name))
            if dep in PINNED or dep in found or dep == dist:
                continue
            have = dist_version(dep)
            if have and (not r.specifier or r.specifier.contains(have, prereleases=True)):
                continue
            found[dep] = _pure_candidates(dep, str(Requirement(r.name + str(r.specifier))), ctx)


def _fix_candidates(ctx: _Ctx, dist: str, spec: str, window: str | None) -> Candidates:
    """An additive fix and its dependency window, resolved by pip itself with the pins held."""
    base = _pure_candidates(dist, spec, ctx, fetch=False)
    resolved, err, note = resolve_with_pip(spec, window, ctx.wheelhouse, ctx.opts.offline, ctx.dl_dir,
                                           ctx.opts.target, constraints=ctx.constraints)
    return replace(base, resolved=tuple(resolved), resolve_error=err, resolve_note=note)


def unmet_requirements(target: str | None, exclude: frozenset[str] = frozenset()
                       ) -> dict[str, tuple[str, str, list[str], list[str]]]:
    """Installed distributions whose declared requirements this environment does not meet (what `pip check`
    reports; big images often ship so, torch among them): {name: (name, version, met, unmet)}. `exclude`:
    the distributions being resolved now (a fix whose own requirement is unmet is what gets fixed)."""
    from importlib import metadata

    installed: dict[str, metadata.Distribution] = {}
    for d in metadata.distributions(path=([target] if target else []) + sys.path):
        name = str(canonicalize_name(d.metadata["Name"] or ""))
        if name:
            installed.setdefault(name, d)  # the first on the path wins, as for pip and for import
    out = {}
    for name, dist in installed.items():
        if name in exclude:
            continue
        met: list[str] = []
        unmet: list[str] = []
        for line in dist.requires or []:
            try:
                req = Requirement(line)
            except ValueError:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            dep = installed.get(str(canonicalize_name(req.name)))
            ok = dep is not None and (not req.specifier or req.specifier.contains(dep.version, prereleases=True))
            (met if ok else unmet).append(line)
        if unmet:
            out[name] = (dist.metadata["Name"], dist.version, met, unmet)
    return out


def planned_pins(constraints: str) -> dict[str, str]:
    """The pins of a plan for another build (`install --torch/--cuda/--python`) that this environment does not
    have installed: {name: version}. Empty for a plan for this environment (every pin is what is installed)."""
    out = {}
    for line in constraints.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not name.startswith("#") and dist_version(name.strip()) != version.strip():
            out[name.strip()] = version.strip()
    return out


def _held_view(folder: Path, unmet: dict[str, tuple[str, str, list[str], list[str]]],
               planned: dict[str, str] | None = None) -> Path:
    """A folder of metadata-only copies of the installed distributions that declare only what is met here,
    first on the resolver's path: pip then holds them as installed and resolves the fix around them instead
    of giving up on requirements the image already lacked (it would need them from an index it cannot use).
    `planned`: the target build's torch/triton (planned_pins), held as installed the same way, so a fix's
    window is resolved against the target's versions without this machine's index offering that torch."""
    folder.mkdir(parents=True, exist_ok=True)
    planned = planned or {}
    rows = [(n, v, m) for n, v, m, _ in unmet.values() if str(canonicalize_name(n)) not in planned]
    rows += [(n, v, []) for n, v in planned.items()]
    for name, version, met in rows:
        info = folder / f"{canonicalize_name(name)}-{version}.dist-info"
        info.mkdir(parents=True)
        lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in met)]
        (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _pip_error(text: str) -> str:
    """pip's own explanation of a failed resolution, in a few lines (the conflict, not the help URL)."""
    noise = ("To fix this", "1. loosen", "2. remove", "Processing", "Requirement already", "WARNING: Location")
    keep = [ln.strip() for ln in text.splitlines()
            if ln.strip() and "dealing-with-dependency-conflicts" not in ln and not ln.strip().startswith(noise)]
    return " | ".join(keep[-8:])[:900]


def resolve_with_pip(spec: str, window: str | None, wheelhouse: Path, offline: bool, dl_dir: Path,
                     target: str | None, constraints: Path | None = None,
                     ) -> tuple[list[wheels.WheelInfo], str | None, str | None]:
    """`pip install --dry-run --report` for `spec`: what pip would add to this environment (what is
    installed and fits stays), with torch/triton/transformers pinned by the `constraints` file and the
    fix's known-good window (matrix) as extra constraints. Wheels only; each one is inspected.
    Returns (wheels, error, note); the note says which of the pinned packages' own unmet requirements
    (a `pip check` failure that predates kernelcheck) the resolution was made around."""
    note = None
    with tempfile.TemporaryDirectory(prefix="kernelcheck-resolve-") as tmp:
        cons = Path(tmp) / "constraints.txt"
        lines = [constraints.read_text(encoding="utf-8")] if constraints else []
        lines += [w.strip() for w in (window or "").split(";") if w.strip()]
        cons.write_text("\n".join(lines) + "\n", encoding="utf-8")
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
               "--no-input", "--only-binary", ":all:", "--report", str(report), "-c", str(cons), *PIP_NET]
        if wheelhouse.is_dir():
            cmd += ["--find-links", str(wheelhouse)]
        if offline:
            cmd += ["--no-index"]
        env = dict(os.environ)
        path = [target] if target else []  # what --target already holds counts as installed
        wanted = [spec, *(w.strip() for w in (window or "").split(";") if w.strip())]
        resolving = {str(canonicalize_name(Requirement(r).name)) for r in wanted}
        unmet = unmet_requirements(target, frozenset(resolving))
        planned = planned_pins(constraints.read_text(encoding="utf-8")) if constraints else {}
        if unmet or planned:
            path.insert(0, str(_held_view(Path(tmp) / "held", unmet, planned)))
            note = _unmet_note(unmet) if unmet else None
        if path:
            env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        try:
            with working(f"kernelcheck install: pip resolving {spec} (metadata only)", announce=True):
                res = subprocess.run([*cmd, spec], capture_output=True, text=True, timeout=300, env=env,
                                     preexec_fn=lifeline.preexec())
        except (OSError, subprocess.SubprocessError) as exc:
            return [], f"pip's resolver did not run: {exc}", note
        if res.returncode != 0 or not report.exists():
            where = "the wheelhouse" + (" (offline)" if offline else " or PyPI")
            return [], f"pip cannot resolve {spec} from {where} with torch/triton/transformers pinned: " + \
                (_pip_error((res.stderr or "") + "\n" + (res.stdout or "")) or f"exit {res.returncode}"), note
        items: list[dict[str, Any]] = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    got, err = _report_wheels(items, dl_dir, constraints)
    return got, err, note


def _unmet_note(unmet: dict[str, tuple[str, str, list[str], list[str]]]) -> str:
    """What the plan says about installed distributions that already fail `pip check`."""
    shown = sorted(unmet.values(), key=lambda u: (u[0].lower() not in PINNED, u[0].lower()))
    return "this environment already fails `pip check` (not caused by kernelcheck): " + "; ".join(
        f"{n} {v} declares {', '.join(u[:2])}{' ...' if len(u) > 2 else ''}" for n, v, _, u in shown[:3]) + \
        (f" and {len(shown) - 3} more" if len(shown) > 3 else "") + \
        "; pip resolved the fix with those packages held as installed and left them as they are"


def _report_wheels(items: list[dict[str, Any]], dl_dir: Path,
                   constraints: Path | None) -> tuple[list[wheels.WheelInfo], str | None]:
    """The wheel of each item of pip's install report (downloaded where pip found it on an index), inspected."""
    out: list[wheels.WheelInfo] = []
    for it in items:
        url = (it.get("download_info") or {}).get("url", "")
        whl: Path | None = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)) \
            if url.startswith("file:") else None
        if whl is None:
            whl, why = _pip_download(["--only-binary", ":all:", f"{it['metadata']['name']}=="
                                      f"{it['metadata']['version']}"], dl_dir, constraints)
            if whl is None:
                return [], why
        info = wheels.inspect_wheel(whl)
        if info is None:
            return [], f"{whl.name} is not a wheel"
        out.append(info)
    return out, None


def _trials(ctx: _Ctx, pkg: matrix.PackageInfo, own: list[wheels.WheelInfo]) -> dict[str, wheels.TrialImport]:
    """Trial imports for compiled wheels that do not say what they were built for (plain `pip wheel` names)."""
    env = ctx.env
    if not (env.torch and env.torch.cuda and pkg.extension):
        return {}
    target = wheel_fit(env, ctx.opts)
    out = {}
    for w in own:
        if w.build is not None or not w.so_arches or w.error:
            continue
        if wheels.match(w, target, extension=pkg.extension).needs_trial:
            out[w.path] = trial_import(w, pkg.extension, ctx.opts.target, env.torch.version)
    return out


def _overlay_sources(ctx: _Ctx, tools: dict[str, bool]) -> dict[str, str]:
    """Where the build overlay gets each build tool that is not importable here."""
    out = {}
    for t in build.BUILD_TOOLS:
        if tools.get(t):
            continue
        if ctx.whl.get(t):
            out[t] = "wheelhouse"
        elif not ctx.opts.offline:
            out[t] = "PyPI"
    return out


def _gather_extension(ctx: _Ctx, pkg: matrix.PackageInfo, sdist: Path | None) -> Candidates:
    env, dist = ctx.env, pkg.install_distribution
    own = ctx.pinned_version(dist, ctx.whl.get(dist, []))
    chosen_sdist, origin, sd_err = _find_sdist(ctx, pkg, sdist)
    version = ctx.versions.get(dist)
    if not version and chosen_sdist is not None:
        mm = _SDIST_RE.match(Path(chosen_sdist).name)
        version = mm["version"] if mm else None
    if not version and own:
        version = max(own, key=lambda w: wheels.version_key(w.name.filename)).name.public_version
    url, status, status_kind = _release(ctx, pkg, version)
    tools = {t: importlib.util.find_spec(t) is not None for t in build.BUILD_TOOLS}
    from kernelcheck.core.environment import nvcc_version

    _, nvcc_path = nvcc_version(env.cuda_home)
    return Candidates(wheels=tuple(own), sdist=str(chosen_sdist) if chosen_sdist else None, sdist_origin=origin,
                      sdist_error=sd_err, release_url=url, release_status=status,
                      release_kind=status_kind, build_tools=tools,
                      nvcc_arches=build.nvcc_arches(nvcc_path) if nvcc_path else (),
                      trials=_trials(ctx, pkg, own), overlay=_overlay_sources(ctx, tools))


def _find_sdist(ctx: _Ctx, pkg: matrix.PackageInfo, sdist: Path | None) -> tuple[Path | None, str, str | None]:
    env, opts, dist = ctx.env, ctx.opts, pkg.install_distribution
    sd_list = ctx.pinned_version(dist, ctx.sdists.get(dist, []))
    if sdist is not None:
        return sdist, "--sdist", None
    if sd_list:
        return sorted(sd_list, key=lambda p: wheels.version_key(p.name))[-1], "wheelhouse", None
    if opts.source in ("auto", "build", "pypi") and not opts.offline and env.torch and env.torch.cuda:
        spec = f"{dist}=={ctx.versions[dist]}" if dist in ctx.versions else dist
        skip = {f"{pkg.env_prefix}_SKIP_CUDA_BUILD": "TRUE"} if pkg.env_prefix else {}
        path, err = _pip_download(["--no-binary", ":all:", "--no-build-isolation", spec], ctx.dl_dir,
                                  ctx.constraints, skip)
        if path:
            return path, "pypi", None
        return None, "", f"no sdist: PyPI download failed: {err}"
    if opts.offline:
        return None, "", "no sdist in the wheelhouse and offline (--offline): pass --sdist FILE"
    return None, "", None


def _release(ctx: _Ctx, pkg: matrix.PackageInfo,
             version: str | None) -> tuple[str | None, str | None, RejectKind | None]:
    """The release wheel's URL, its status and why it is not taken (the status's kind)."""
    env, opts = ctx.env, ctx.opts
    target = wheel_fit(env, opts)
    if pkg.release_wheel and version and target.cuda_major is not None:
        url = pkg.release_wheel.format(version=version, cuda_major=target.cuda_major, torch_mm=target.torch_mm,
                                       cxx11abi=str(bool(target.cxx11abi)).upper(), py=env.python_tag[2:],
                                       platform=env.platform)
        mirror = settings.variable("KERNELCHECK_RELEASE_MIRROR")  # an internal mirror of GitHub releases
        if mirror:
            url = re.sub(r"^https://github\.com", mirror.rstrip("/"), url)
        if opts.source not in ("auto", "release"):
            return url, None, None
        return url, *_release_status(url, opts.offline)
    if pkg.release_wheel and target.cuda_major is None:
        return None, "torch is a CPU build: upstream wheels exist only for CUDA builds", RejectKind.RELEASE_UNCHECKED
    return None, None, None


def _pure_candidates(dist: str, spec: str, ctx: _Ctx, fetch: bool = True) -> Candidates:
    whl, opts = ctx.whl, ctx.opts
    own = tuple(w for w in whl.get(dist, []) if w.name.version in Requirement(spec).specifier
                or not Requirement(spec).specifier)
    if own or not fetch:
        return Candidates(wheels=own)
    if opts.offline or opts.source not in ("auto", "pypi", "wheelhouse"):
        return Candidates(wheels=own, pypi_error="skipped: offline (--offline)" if opts.offline else None)
    if opts.source == "wheelhouse":
        return Candidates(wheels=own, pypi_error="not in the wheelhouse (--source wheelhouse)")
    path, err = _pip_download(["--only-binary", ":all:", spec], ctx.dl_dir, ctx.constraints)
    info = wheels.inspect_wheel(path) if path else None
    return Candidates(wheels=own, pypi_wheel=info, pypi_error=None if info else f"PyPI: {err}")
