"""Find the candidates a plan chooses from: wheelhouse files, PyPI, the upstream release wheel, sdists.

This is the only part of planning that touches the disk and the network; `plan.make_plan` stays pure.
Network use is explicit: `offline` skips PyPI and the release server, and every skipped or failed
lookup becomes a rejected candidate with its reason (offline is a reason, not a crash).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernelcheck.core import matrix as matrix_mod
from kernelcheck.core import settings
from kernelcheck.core.environment import Environment, dist_version
from kernelcheck.install import build as build_mod
from kernelcheck.install import wheels
from kernelcheck.install.plan import PINNED, Candidates, Options, target_of

_SDIST_RE = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-]*)\.tar\.gz$")


def _sdist_version(filename: str) -> str | None:
    m = _SDIST_RE.match(filename)
    return m["version"] if m else None
PIP_NET = ["--retries", "0", "--timeout", "15"]


def default_wheelhouse() -> Path:
    """$KERNELCHECK_HOME/wheelhouse, else ~/.cache/kernelcheck/wheelhouse."""
    return settings.current().wheelhouse


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
            info = wheels.inspect_wheel(p, build_mod.read_sidecar(p))
            if info is not None:
                whl.setdefault(info.name.name, []).append(info)
        elif p.name.endswith(".tar.gz"):
            m = _SDIST_RE.match(p.name)
            if m:
                sd.setdefault(str(canonicalize_name(m["name"])), []).append(p)
    return whl, sd


_CONSTRAINTS: list[Path] = []


def _constraints_file(env: Environment) -> Path:
    """The pins every pip call carries (torch, triton, transformers as installed)."""
    import tempfile

    from kernelcheck.install.apply import constraints_text

    fd, name = tempfile.mkstemp(prefix="kernelcheck-constraints-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(constraints_text(env, frozenset()))
    _CONSTRAINTS[:] = [Path(name)]
    return Path(name)


def _pip_download(args: list[str], dest: Path, env_extra: dict[str, str] | None = None) -> tuple[Path | None, str]:
    """Run `pip download`; (the new file, "") or (None, the reason in one line)."""
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(env_extra or {})
    pins = ["-c", str(_CONSTRAINTS[0])] if _CONSTRAINTS else []
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", *PIP_NET,
           *pins, "-d", str(dest), *args]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
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


def _release_status(url: str, offline: bool) -> str:
    if offline:
        return "skipped: offline (--offline); the release server was not asked"
    try:
        import requests

        r = requests.head(url, allow_redirects=True, timeout=15)
    except Exception as exc:  # noqa: BLE001 - no network is a reason, not a crash
        return f"unreachable: {type(exc).__name__} (offline or blocked): {str(exc).splitlines()[0][:160]}"
    if r.status_code == 200:
        return "exists"
    if r.status_code == 404:
        return "missing: upstream publishes no wheel for this torch/CUDA/cxx11abi/Python (HTTP 404)"
    return f"unreachable: HTTP {r.status_code}"


def gather(env: Environment, packages: tuple[str, ...], opts: Options, wheelhouse: Path,
           sdist: Path | None = None, versions: dict[str, str] | None = None) -> dict[str, Candidates]:
    """Candidates for each needed package (import names), its dependencies and offered fixes."""
    m = matrix_mod.load()
    versions = versions or {}
    whl, sdists = scan_wheelhouse(wheelhouse)
    pins = _constraints_file(env)
    found: dict[str, Candidates] = {}
    target = target_of(env, opts)
    can_write = os.access(wheelhouse, os.W_OK) if wheelhouse.exists() else True
    dl_dir = wheelhouse if can_write else Path(os.environ.get("TMPDIR", "/tmp")) / "kernelcheck-downloads"

    def pinned_version(dist: str, items: list) -> list:
        want = versions.get(dist)
        if not want:
            return items
        return [w for w in items if (w.name.public_version if isinstance(w, wheels.WheelInfo)
                                     else _sdist_version(w.name)) == want]

    for name in packages:
        pkg = m.packages[name]
        dist = pkg.install_distribution
        own = pinned_version(dist, whl.get(dist, []))
        c = Candidates(wheels=tuple(own))
        if pkg.kind == "triton":
            cuda_torch = bool(env.torch and env.torch.cuda)  # a CPU torch is refused: no download for it
            if opts.source in ("auto", "pypi", "build", "release") and not opts.offline and cuda_torch:
                spec = f"{dist}=={versions[dist]}" if dist in versions else dist
                path, err = _pip_download(["--only-binary", ":all:", spec], dl_dir)
                info = wheels.inspect_wheel(path) if path else None
                c = replace(c, pypi_wheel=info, pypi_error=None if info else f"PyPI: {err}",
                            wheels=tuple(w for w in own if not info or w.path != info.path))
            elif opts.offline:
                c = replace(c, pypi_error="skipped: offline (--offline)")
            found[dist] = c
            # dependencies of every candidate (einops ...), from the wheelhouse or PyPI
            for w in (*c.wheels, *((c.pypi_wheel,) if c.pypi_wheel else ())):
                for r in wheels.requirements(w, extras=("cuda",)):
                    dep = str(canonicalize_name(r.name))
                    if dep in PINNED or dep in found or dep == dist:
                        continue
                    have = dist_version(dep)
                    if have and (not r.specifier or r.specifier.contains(have, prereleases=True)):
                        continue
                    found[dep] = _pure_candidates(dep, str(Requirement(r.name + str(r.specifier))), whl, opts,
                                                  dl_dir)
            for rule in m.breakages:
                for rem in rule.remedies:
                    p = rem["package"]
                    if p in found:
                        continue
                    wanted = p in opts.with_packages or (rem["kind"] == "change" and p in opts.allow_change)
                    found[p] = _pure_candidates(p, rem["spec"], whl, opts, dl_dir, fetch=wanted)
        elif pkg.kind == "cuda-extension":
            sd_list = pinned_version(dist, sdists.get(dist, []))
            chosen_sdist, origin, sd_err = None, "", None
            if sdist is not None:
                chosen_sdist, origin = sdist, "--sdist"
            elif sd_list:
                chosen_sdist, origin = sorted(sd_list, key=lambda p: wheels.version_key(p.name))[-1], "wheelhouse"
            elif opts.source in ("auto", "build", "pypi") and not opts.offline and env.torch and env.torch.cuda:
                spec = f"{dist}=={versions[dist]}" if dist in versions else dist
                skip = {f"{pkg.env_prefix}_SKIP_CUDA_BUILD": "TRUE"} if pkg.env_prefix else {}
                path, err = _pip_download(["--no-binary", ":all:", "--no-build-isolation", spec], dl_dir, skip)
                if path:
                    chosen_sdist, origin = path, "pypi"
                else:
                    sd_err = f"no sdist: PyPI download failed: {err}"
            elif opts.offline:
                sd_err = "no sdist in the wheelhouse and offline (--offline): pass --sdist FILE"
            version = versions.get(dist)
            if not version and chosen_sdist is not None:
                mm = _SDIST_RE.match(Path(chosen_sdist).name)
                version = mm["version"] if mm else None
            if not version and own:
                version = max(own, key=lambda w: wheels.version_key(w.name.filename)).name.public_version
            url = status = None
            if pkg.release_wheel and version and target.cuda_major is not None:
                py = env.python_tag[2:]
                url = pkg.release_wheel.format(version=version, cuda_major=target.cuda_major, torch_mm=target.torch_mm,
                                               cxx11abi=str(bool(target.cxx11abi)).upper(), py=py,
                                               platform=env.platform)
                mirror = settings.current().release_mirror  # an internal mirror of GitHub releases
                if mirror:
                    url = re.sub(r"^https://github\.com", mirror.rstrip("/"), url)
                status = _release_status(url, opts.offline) if opts.source in ("auto", "release") else None
            elif pkg.release_wheel and target.cuda_major is None:
                status = "torch is a CPU build: upstream wheels exist only for CUDA builds"
            tools = {t: importlib.util.find_spec(t) is not None for t in ("setuptools", "wheel", "ninja")}
            nv_arches: tuple[str, ...] = ()
            from kernelcheck.core.environment import nvcc_version

            _, nvcc_path = nvcc_version(env.cuda_home)
            if nvcc_path:
                nv_arches = build_mod.nvcc_arches(nvcc_path)
            found[dist] = replace(c, sdist=str(chosen_sdist) if chosen_sdist else None, sdist_origin=origin,
                                  sdist_error=sd_err, release_url=url, release_status=status, build_tools=tools,
                                  nvcc_arches=nv_arches)
    for extra in opts.with_packages:
        if extra not in found:
            found[extra] = _pure_candidates(extra, extra, whl, opts, dl_dir, fetch=True)
    pins.unlink(missing_ok=True)
    _CONSTRAINTS.clear()
    return found


def _pure_candidates(dist: str, spec: str, whl: dict[str, list[wheels.WheelInfo]], opts: Options, dl_dir: Path,
                     fetch: bool = True) -> Candidates:
    own = tuple(w for w in whl.get(dist, []) if w.name.version in Requirement(spec).specifier
                or not Requirement(spec).specifier)
    if own or not fetch:
        return Candidates(wheels=own)
    if opts.offline or opts.source not in ("auto", "pypi", "wheelhouse"):
        return Candidates(wheels=own, pypi_error="skipped: offline (--offline)" if opts.offline else None)
    if opts.source == "wheelhouse":
        return Candidates(wheels=own, pypi_error="not in the wheelhouse (--source wheelhouse)")
    path, err = _pip_download(["--only-binary", ":all:", spec], dl_dir)
    info = wheels.inspect_wheel(path) if path else None
    return Candidates(wheels=own, pypi_wheel=info, pypi_error=None if info else f"PyPI: {err}")
