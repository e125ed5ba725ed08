"""Wheels of compiled kernel packages: names, tags, contents, and whether one fits this environment.

Pure functions and frozen values, no pip and no network:
- `parse_wheel_name` splits a wheel filename into its PEP 427 parts, and `build_tag` reads the
  CachedWheels local version (`+cu13torch2.11cxx11abiTRUE`) that causal-conv1d, mamba-ssm and
  flash-attn put on their release wheels.
- `so_arches` reads which GPU architectures a compiled extension carries, straight from the ELF
  `.nv_fatbin` section (no cuobjdump needed): SASS (`sm_90`) and PTX (`compute_90`) entries.
- `inspect_wheel` opens a wheel (zip integrity, METADATA, every .so's arches, sha256), and `match`
  decides accepted/rejected for one target with a reason for each rejection, like the kernels
  package does for its variants.
"""

from __future__ import annotations

import email.parser
import hashlib
import re
import struct
import sys
import sysconfig
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging import tags
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kernelcheck.core.gpu import arch_serves, cap_to_sm
from kernelcheck.core.plan_step import RejectKind

_WHEEL_RE = re.compile(
    r"^(?P<name>[^\s-]+?)-(?P<version>[^\s-]+?)(-(?P<build>\d[^-]*))?-(?P<py>[^\s-]+?)-(?P<abi>[^\s-]+?)"
    r"-(?P<plat>[^\s-]+?)\.whl$"
)
# The local version upstream CachedWheels builds put on release wheels (setup.py get_wheel_url).
_LOCAL_RE = re.compile(r"^cu(?P<cuda>\d+)torch(?P<torch>\d+\.\d+)cxx11abi(?P<abi>TRUE|FALSE)$", re.IGNORECASE)

FATBIN_MAGIC = 0xBA55ED50
_KIND = {1: "compute", 2: "sm"}  # fatbin entry kinds: 1 = PTX, 2 = ELF (SASS)


@dataclass(frozen=True)
class WheelName:
    filename: str
    name: str  # canonical distribution name (causal-conv1d)
    version: str  # full version, local part included
    public_version: str
    local: str
    python_tag: str
    abi_tag: str
    platform_tag: str


@dataclass(frozen=True)
class BuildTag:
    """What a CachedWheels local version says the wheel was built for."""

    cuda_major: int
    torch_mm: str  # "2.11"
    cxx11abi: bool


@dataclass(frozen=True)
class WheelFit:
    """The environment a compiled wheel must fit."""

    python_tag: str  # cp311
    platform: str  # linux_x86_64
    torch_mm: str  # 2.14
    cuda_major: int | None  # None: CPU build of torch
    cxx11abi: bool | None
    arches: tuple[str, ...]  # GPU capabilities to serve, "9.0"
    tags: frozenset[Tag] | None = None  # accepted wheel tags; None: generated from python_tag + platform


@dataclass(frozen=True)
class WheelInfo:
    path: str
    name: WheelName
    sha256: str
    ok_zip: bool
    error: str | None  # why the file cannot be used at all (corrupt zip, no METADATA ...)
    requires: tuple[str, ...] = ()  # Requires-Dist lines
    so_arches: dict[str, tuple[str, ...]] = field(default_factory=dict)  # member -> ("sm_90", "compute_90")
    build: BuildTag | None = None  # from the filename's local version, else from the sidecar
    sidecar: dict[str, Any] | None = None  # kernelcheck's own record of how the wheel was built


@dataclass(frozen=True)
class TrialImport:
    """An import of an unpacked candidate wheel against the installed torch, in a fresh process."""

    module: str
    ok: bool
    error: str  # the last line of the failure ("undefined symbol: ..."), "" when it imported
    torch: str  # torch version it was tried against


@dataclass(frozen=True)
class Decision:
    candidate: str
    accepted: bool
    reason: str
    needs_trial: bool = False  # rejected only for want of a trial import (an unlabelled compiled wheel)
    kind: RejectKind | None = None  # why it was rejected (None: accepted)

    def __post_init__(self) -> None:
        if not self.accepted and self.kind is None:
            raise ValueError(f"a rejection of {self.candidate} without its kind")


def parse_wheel_name(filename: str) -> WheelName | None:
    """PEP 427 parts of a wheel filename, or None when it is not one."""
    base = Path(filename).name
    m = _WHEEL_RE.match(base)
    if not m:
        return None
    version = m["version"]
    public, _, local = version.partition("+")
    return WheelName(base, str(canonicalize_name(m["name"])), version, public, local, m["py"], m["abi"], m["plat"])


def build_tag(local: str) -> BuildTag | None:
    m = _LOCAL_RE.match(local or "")
    if not m:
        return None
    return BuildTag(int(m["cuda"]), m["torch"], m["abi"].upper() == "TRUE")


def local_version(cuda_major: int, torch_mm: str, cxx11abi: bool) -> str:
    """The CachedWheels local version for a build (what upstream names its release wheels with)."""
    return f"cu{cuda_major}torch{torch_mm}cxx11abi{str(cxx11abi).upper()}"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _elf_sections(data: bytes) -> dict[str, bytes]:
    """Section name -> bytes of a 64-bit little-endian ELF file (all Linux x86-64/aarch64 .so files)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    e_shoff = struct.unpack_from("<Q", data, 0x28)[0]
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not e_shoff or e_shstrndx >= e_shnum or e_shoff + e_shnum * e_shentsize > len(data):
        return {}
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    str_off = heads[e_shstrndx][4]
    out = {}
    for h in heads:
        start = str_off + h[0]
        end = data.find(b"\0", start)
        name = data[start:end].decode("ascii", "replace")
        sh_type, off, size = h[1], h[4], h[5]
        if sh_type != 8 and off + size <= len(data):  # 8 = SHT_NOBITS (no bytes in the file)
            out[name] = data[off:off + size]
    return out


def fatbin_arches(blob: bytes) -> tuple[str, ...]:
    """Architectures in a CUDA fatbin blob: 'sm_90' for SASS, 'compute_90' for PTX, in file order."""
    found: list[str] = []
    pos = 0
    while pos + 16 <= len(blob):
        magic, _ver, head, size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            nxt = blob.find(struct.pack("<I", FATBIN_MAGIC), pos + 1)  # containers are padded/aligned
            if nxt < 0:
                break
            pos = nxt
            continue
        p, end = pos + head, min(pos + head + size, len(blob))
        while p + 32 <= end:
            kind, _ev, ehead, payload = struct.unpack_from("<HHIQ", blob, p)
            arch = struct.unpack_from("<I", blob, p + 28)[0]
            if kind in _KIND and arch:
                found.append(f"{_KIND[kind]}_{arch}")
            if ehead == 0:
                break
            p += ehead + payload
        pos = max(end, pos + 16)
    return tuple(dict.fromkeys(found))


def so_arches(data: bytes) -> tuple[str, ...]:
    """GPU architectures compiled into a shared object (empty for a .so with no device code)."""
    secs = _elf_sections(data)
    blobs = [v for k, v in secs.items() if "fatbin" in k.lower() and k != ".nvFatBinSegment"]
    if not blobs and not secs:
        blobs = [data]  # not a parsable ELF: scan the raw bytes for fatbin containers
    out: list[str] = []
    for b in blobs:
        out.extend(fatbin_arches(b))
    return tuple(dict.fromkeys(out))


def inspect_wheel(path: str | Path, sidecar: dict[str, Any] | None = None) -> WheelInfo | None:
    """Everything kernelcheck checks in a wheel file; None when the name is not a wheel name."""
    path = Path(path)
    wn = parse_wheel_name(path.name)
    if wn is None:
        return None
    digest = sha256_file(path)
    build = build_tag(wn.local)
    if build is None and sidecar and sidecar.get("cuda_major") is not None:
        build = BuildTag(int(sidecar["cuda_major"]), str(sidecar["torch_mm"]), bool(sidecar["cxx11abi"]))
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
            if bad is not None:
                return WheelInfo(str(path), wn, digest, False, f"corrupt wheel: member {bad} fails its CRC check",
                                 build=build, sidecar=sidecar)
            meta_name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
            if meta_name is None:
                return WheelInfo(str(path), wn, digest, True, "not a wheel: no .dist-info/METADATA inside",
                                 build=build, sidecar=sidecar)
            meta = email.parser.Parser().parsestr(zf.read(meta_name).decode("utf-8", "replace"))
            mversion = (meta.get("Version") or "").strip()
            if mversion and mversion != wn.version:
                return WheelInfo(str(path), wn, digest, True,
                                 f"filename says version {wn.version} but METADATA says {mversion} (renamed file)",
                                 build=build, sidecar=sidecar)
            requires = tuple(meta.get_all("Requires-Dist") or ())
            arches = {n: so_arches(zf.read(n)) for n in zf.namelist() if n.endswith(".so") or ".so." in n}
    except (zipfile.BadZipFile, OSError, EOFError, struct.error) as exc:
        return WheelInfo(str(path), wn, digest, False, f"corrupt wheel: {type(exc).__name__}: {exc}",
                         build=build, sidecar=sidecar)
    return WheelInfo(str(path), wn, digest, True, None, requires, arches, build, sidecar)


def requirements(info: WheelInfo, extras: tuple[str, ...] = ()) -> list[Requirement]:
    """Requires-Dist entries that apply here (markers evaluated; `extras` requested)."""
    out = []
    for line in info.requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None:
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if not any(req.marker.evaluate(e) for e in envs):
                continue
        out.append(req)
    return out


def target_tags(python_tag: str, platform: str) -> frozenset[Tag]:
    """The wheel tags an interpreter `python_tag` (cp311) on `platform` (linux_x86_64) accepts.

    For the running interpreter this is `packaging.tags.sys_tags()` (its real glibc level); for another
    one (a target Python, or a machine described by value) the tags are generated with packaging for
    every manylinux level up to glibc 2.40, so abi3 (cp39-abi3 runs on any CPython >= 3.9), compressed
    multi-platform tags and legacy manylinux aliases all resolve the way pip resolves them.
    """
    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    if python_tag == here and platform == sysconfig.get_platform().replace("-", "_").replace(".", "_"):
        return frozenset(tags.sys_tags())
    m = re.fullmatch(r"cp(\d)(\d+)", python_tag)
    if not m:
        return frozenset()
    version = (int(m[1]), int(m[2]))
    plats = [platform]
    arch = platform.split("_", 1)[-1] if platform.startswith("linux_") else ""
    if arch:
        plats = [f"manylinux_2_{minor}_{arch}" for minor in range(40, 4, -1)] + [
            f"manylinux{alias}_{arch}" for alias in ("2014", "2010", "1")] + [platform]
    out = set(tags.cpython_tags(version, platforms=plats))
    out.update(tags.compatible_tags(version, f"cp{m[1]}{m[2]}", plats))
    return frozenset(out)


def tag_decision(filename: str, python_tag: str, platform: str,
                 accepted: frozenset[Tag] | None = None) -> str | None:
    """Why a wheel's tags do not fit (python, ABI or platform named), or None when one of them fits."""
    try:
        wheel_tags = parse_wheel_filename(Path(filename).name)[3]
    except (InvalidWheelFilename, InvalidVersion) as exc:
        return f"not a valid wheel filename: {exc}"
    ok = accepted if accepted is not None else target_tags(python_tag, platform)
    if wheel_tags & ok:
        return None
    pys = {t.interpreter for t in wheel_tags}
    abis = {t.abi for t in wheel_tags}
    plats = {t.platform for t in wheel_tags}
    have_py = {t.interpreter for t in ok}
    have_plat = {t.platform for t in ok}
    shown = "-".join(sorted(pys)[:1] + sorted(abis)[:1] + [".".join(sorted(plats))])
    if not pys & have_py:
        return f"built for {', '.join(sorted(pys))} ({shown}), this Python is {python_tag}"
    if not plats & have_plat:
        return f"platform {'.'.join(sorted(plats))} ({shown}), this machine is {platform}"
    return f"ABI tag {', '.join(sorted(abis))} ({shown}) does not fit {python_tag} on {platform}"


def file_and_tags_failure(info: WheelInfo, target: WheelFit, expected_sha256: str | None) -> Decision | None:
    """The rejection of a wheel for its file (corrupt, renamed), its sha256 or its tags; None when they fit."""
    cand = info.name.filename
    if info.error:
        return Decision(cand, False, info.error, kind=RejectKind.WHEEL_FILE)
    if expected_sha256 and expected_sha256 != info.sha256:
        return Decision(cand, False, f"sha256 {info.sha256[:16]}... differs from the expected "
                        f"{expected_sha256[:16]}... (a changed or tampered file)", kind=RejectKind.SHA256)
    why = tag_decision(info.name.filename, target.python_tag, target.platform, target.tags)
    return Decision(cand, False, why, kind=RejectKind.WHEEL_TAGS) if why else None


def _build_mismatch(b: BuildTag, target: WheelFit) -> tuple[RejectKind, str] | None:
    if b.torch_mm != target.torch_mm:
        return RejectKind.TORCH_MINOR, (f"built for torch {b.torch_mm}, installed torch is {target.torch_mm} "
                                        "(extensions are tied to one torch minor: C++ ABI)")
    if b.cuda_major != target.cuda_major:
        return RejectKind.CUDA_MAJOR, f"built for CUDA {b.cuda_major}, torch here uses CUDA {target.cuda_major}"
    if target.cxx11abi is not None and b.cxx11abi != target.cxx11abi:
        return RejectKind.CXX11ABI, (f"built with cxx11abi {str(b.cxx11abi).upper()}, torch here uses "
                                     f"{str(target.cxx11abi).upper()}")
    return None


def extension_members(info: WheelInfo, extension: str = "") -> list[str]:
    """The .so members that are the package's extension (all of them when `extension` is not named)."""
    return [m for m in info.so_arches if not extension or Path(m).name.startswith(extension + ".")] \
        or list(info.so_arches)


def has_extension(info: WheelInfo, extension: str) -> bool:
    """Whether the wheel carries the compiled module `extension` (selective_scan_cuda.cpython-312-....so)."""
    return any(Path(m).name.startswith(extension + ".") for m in info.so_arches)


def _arch_failure(info: WheelInfo, target: WheelFit, members: list[str]) -> tuple[RejectKind, str] | None:
    for cap in target.arches:
        for m in members:
            got = info.so_arches[m]
            how = arch_serves(got, cap)
            if how is None:
                return RejectKind.GPU_ARCH, (f"{Path(m).name} carries {', '.join(got) or 'no GPU code'}, nothing "
                                             f"that runs on sm_{cap_to_sm(cap)}")
            if how == "ptx-jit":
                return RejectKind.PTX_ONLY, (f"{Path(m).name} has only PTX for sm_{cap_to_sm(cap)} "
                                             f"({', '.join(got)}): the driver would JIT-compile it at first use")
    return None


def match(info: WheelInfo, target: WheelFit, expected_sha256: str | None = None,
          extension: str = "", trial: TrialImport | None = None) -> Decision:
    """Accept or reject a wheel for `target`, with the first reason it fails.

    A compiled wheel whose name and sidecar do not say which torch it was built for (a plain
    `pip wheel` name such as causal_conv1d-1.7.0-cp312-cp312-linux_x86_64.whl) is decided from what
    it is: the GPU code in its .so and `trial`, an import of it against the installed torch in a fresh
    process (`sources.trial_import`); without a trial it is rejected with that reason.
    """
    cand = info.name.filename
    if (unfit := file_and_tags_failure(info, target, expected_sha256)) is not None:
        return unfit
    if extension and not has_extension(info, extension):  # built without it (mamba#977, *_SKIP_CUDA_BUILD)
        return Decision(cand, False, f"the wheel carries no {extension} extension module (its build skipped the CUDA "
                        "extension): the package would import and its kernels would fail or fall back",
                        kind=RejectKind.NO_EXTENSION)
    if not any(info.so_arches.values()):  # no GPU code: its tags decide
        return Decision(cand, True, "pure Python wheel" if not info.name.abi_tag.startswith("cp")
                        and info.name.abi_tag != "abi3" else f"tags {info.name.python_tag}-{info.name.abi_tag}-"
                        f"{info.name.platform_tag} fit {target.python_tag} on {target.platform}")
    if target.cuda_major is None:
        return Decision(cand, False, "torch here is a CPU build: a CUDA extension cannot load",
                        kind=RejectKind.CPU_TORCH)
    b = info.build
    if b is not None and (mismatch := _build_mismatch(b, target)):
        return Decision(cand, False, mismatch[1], kind=mismatch[0])
    members = extension_members(info, extension)
    if arch := _arch_failure(info, target, members):
        return Decision(cand, False, arch[1], kind=arch[0])
    arches = ", ".join(sorted({a for m in members for a in info.so_arches[m]}))
    if b is not None:
        return Decision(cand, True, f"torch {b.torch_mm}, CUDA {b.cuda_major}, cxx11abi {str(b.cxx11abi).upper()}, "
                        f"{target.python_tag}, {target.platform}, GPU code {arches}")
    if trial is None:
        return Decision(cand, False, "the wheel does not say which torch/CUDA/cxx11abi it was built for (no "
                        "+cuXXtorchM.mcxx11abiX local version and no kernelcheck sidecar) and no trial import "
                        "against the installed torch was run: an extension built for another torch minor fails "
                        "with 'undefined symbol'", needs_trial=True, kind=RejectKind.NEEDS_TRIAL)
    if not trial.ok:
        return Decision(cand, False, f"trial import against the installed torch {trial.torch} failed in a fresh "
                        f"process: {trial.error}", kind=RejectKind.TRIAL_FAILED)
    return Decision(cand, True, f"unlabelled wheel verified: GPU code {arches}, and `import {trial.module}` "
                    f"against the installed torch {trial.torch} works in a fresh process")


def version_key(filename: str) -> tuple[int, Version]:
    """Sort key: the version in a wheel or sdist filename (unparsable versions sort first)."""
    base = Path(filename).name
    wn = parse_wheel_name(base)
    raw = wn.version if wn else base.removesuffix(".tar.gz").rsplit("-", 1)[-1]
    try:
        return (1, Version(raw))
    except InvalidVersion:
        return (0, Version("0"))
