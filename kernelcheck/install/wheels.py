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
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

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
class Target:
    """The environment a compiled wheel must fit."""

    python_tag: str  # cp311
    platform: str  # linux_x86_64
    torch_mm: str  # 2.14
    cuda_major: int | None  # None: CPU build of torch
    cxx11abi: bool | None
    arches: tuple[str, ...]  # GPU capabilities to serve, "9.0"


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
    sidecar: dict | None = None  # kernelcheck's own record of how the wheel was built


@dataclass(frozen=True)
class Decision:
    candidate: str
    accepted: bool
    reason: str


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


def cap_to_sm(cap: str) -> int:
    """'9.0' -> 90, '10.3' -> 103."""
    major, _, minor = cap.partition(".")
    return int(major) * 10 + int(minor or 0)


def arch_serves(arches: tuple[str, ...], cap: str) -> str | None:
    """How a GPU of capability `cap` can run code with these arches: 'sass', 'ptx-jit' or None.

    SASS runs on the same major with an equal or higher minor (sm_80 runs on 8.6); PTX is JIT-compiled
    by the driver for any equal or newer GPU (slow first launch, and only if the driver is new enough).
    """
    want = cap_to_sm(cap)
    sass = [int(a[3:]) for a in arches if a.startswith("sm_") and a[3:].isdigit()]
    ptx = [int(a[8:]) for a in arches if a.startswith("compute_") and a[8:].isdigit()]
    if any(s // 10 == want // 10 and s <= want for s in sass):
        return "sass"
    if any(p <= want for p in ptx):
        return "ptx-jit"
    return None


def inspect_wheel(path: str | Path, sidecar: dict | None = None) -> WheelInfo | None:
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


def match(info: WheelInfo, target: Target, expected_sha256: str | None = None,
          extension: str = "") -> Decision:
    """Accept or reject a compiled wheel for `target`, with the first reason it fails."""
    n = info.name
    cand = n.filename
    if info.error:
        return Decision(cand, False, info.error)
    if expected_sha256 and expected_sha256 != info.sha256:
        return Decision(cand, False, f"sha256 {info.sha256[:16]}... differs from the expected "
                        f"{expected_sha256[:16]}... (a changed or tampered file)")
    pys = n.python_tag.split(".")
    if target.python_tag not in pys and not any(p.startswith("py3") for p in pys):
        return Decision(cand, False, f"built for {n.python_tag}, this Python is {target.python_tag}")
    if n.abi_tag not in ("none", "abi3") and n.abi_tag != target.python_tag:
        return Decision(cand, False, f"ABI tag {n.abi_tag} does not fit {target.python_tag}")
    plats = n.platform_tag.split(".")
    arch = target.platform.split("_", 1)[-1]
    if "any" not in plats and target.platform not in plats and not any(
            p.startswith("manylinux") and p.endswith(arch) for p in plats):
        return Decision(cand, False, f"platform {n.platform_tag}, this machine is {target.platform}")
    if not info.so_arches:
        return Decision(cand, True, "pure Python wheel")
    b = info.build
    if target.cuda_major is None:
        return Decision(cand, False, "torch here is a CPU build: a CUDA extension cannot load")
    if b is None:
        return Decision(cand, False, "the wheel does not say which torch/CUDA/cxx11abi it was built for (no "
                        "+cuXXtorchM.mcxx11abiX local version and no kernelcheck sidecar): an extension built "
                        "for another torch minor fails with 'undefined symbol'")
    if b.torch_mm != target.torch_mm:
        return Decision(cand, False, f"built for torch {b.torch_mm}, installed torch is {target.torch_mm} "
                        "(extensions are tied to one torch minor: C++ ABI)")
    if b.cuda_major != target.cuda_major:
        return Decision(cand, False, f"built for CUDA {b.cuda_major}, torch here uses CUDA {target.cuda_major}")
    if target.cxx11abi is not None and b.cxx11abi != target.cxx11abi:
        return Decision(cand, False, f"built with cxx11abi {str(b.cxx11abi).upper()}, torch here uses "
                        f"{str(target.cxx11abi).upper()}")
    members = [m for m in info.so_arches if not extension or Path(m).name.startswith(extension + ".")] \
        or list(info.so_arches)
    for cap in target.arches:
        for m in members:
            got = info.so_arches[m]
            how = arch_serves(got, cap)
            if how is None:
                return Decision(cand, False, f"{Path(m).name} carries {', '.join(got) or 'no GPU code'}, "
                                f"nothing that runs on sm_{cap_to_sm(cap)}")
            if how == "ptx-jit":
                return Decision(cand, False, f"{Path(m).name} has only PTX for sm_{cap_to_sm(cap)} "
                                f"({', '.join(got)}): the driver would JIT-compile it at first use")
    arches = sorted({a for m in members for a in info.so_arches[m]})
    return Decision(cand, True, f"torch {b.torch_mm}, CUDA {b.cuda_major}, cxx11abi {str(b.cxx11abi).upper()}, "
                    f"{target.python_tag}, {target.platform}, GPU code {', '.join(arches)}")


def version_key(filename: str):
    """Sort key: the version in a wheel or sdist filename (unparsable versions sort first)."""
    from packaging.version import InvalidVersion, Version

    base = Path(filename).name
    wn = parse_wheel_name(base)
    raw = wn.version if wn else base.removesuffix(".tar.gz").rsplit("-", 1)[-1]
    try:
        return (1, Version(raw))
    except InvalidVersion:
        return (0, Version("0"))
