"""Hugging Face Kernel Hub: which Hub build `kernels` would load here, and pre-fetching it for offline jobs.

transformers can swap a layer's (or a fast function's) forward for a kernel from the Kernel Hub
(`use_kernels=True`, through the `kernels` package). When the Hub repository has no build for this
torch/CUDA, `kernelize` keeps the torch forward and logs it at INFO: the job is slow and nobody sees it.

This module answers, from the installed packages rather than from tables in kernelcheck:
- what transformers maps to the Hub (its own `_build_kernel_mapping`, read from its source so it works
  even when transformers considers the installed `kernels` out of its version window), the `kernels`
  window it accepts, `USE_HUB_KERNELS` and the `use_kernels` default of `from_pretrained`;
- which build variant `kernels` itself would choose for each repository (its resolver, through the
  per-release adapter in kernels_api/), with the
  reason every other variant was rejected, listed from `LOCAL_KERNELS`, the Hugging Face cache or the Hub;
- `prefetch`: download exactly the chosen variants into the cache and write a `kernels.lock` in kernels'
  own format (`KernelLocks`), so offline jobs load exactly those builds;
- `applied_kernels`: after loading/kernelizing, whether each Hub kernel really replaced the torch forward.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelcheck.core import environment
from kernelcheck.core.capability import Capability
from kernelcheck.core.errors import KernelsUnusable, LayoutError
from kernelcheck.core.settings import hub_offline, network_timeout
from kernelcheck.integrations import hf_cache_entries, kernels_api
from kernelcheck.integrations.kernels_variants import nearest


@dataclass(frozen=True)
class VariantDecision:
    """kernels' decision for one build variant: accepted (the first accepted one is chosen) or rejected."""

    variant: str
    accepted: bool
    reason: str | None = None
    chosen: bool = False


@dataclass(frozen=True)
class Resolution:
    """Which build variant of one repository `kernels` would load here, and why the others lost."""

    repo_id: str
    version: int | None
    revision: str | None
    source: str  # LOCAL_KERNELS | hf-cache | hub | none
    location: str | None  # a path, or the Hub
    ref: str | None = None  # "v2"
    commit: str | None = None
    decisions: tuple[VariantDecision, ...] = ()
    chosen: str | None = None
    nearest: str | None = None
    would_match: str | None = None
    problem: str | None = None  # arch / minimum kernels version: kernels raises RuntimeError (not a fallback)
    error: str | None = None  # the listing itself failed (offline and not cached, Hub unreachable ...)
    notes: tuple[str, ...] = ()
    blocked: str | None = None  # the cached build exists but kernels' offline lookup will not return it
    unusable: str | None = None  # no kernels adapter fits the installed release: nothing was listed
    kernels_error: str | None = None  # what kernels' own version lookup raises here (offline, not cached)
    hub_unreachable: str | None = None  # the note saying the Hub failed and the cache answered (not in JSON)

    @property
    def spec(self) -> str:
        return f"{self.repo_id}@v{self.version}" if self.version is not None else f"{self.repo_id}@{self.revision}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        del d["hub_unreachable"]  # it is one of the notes
        d["decisions"] = [asdict(x) for x in self.decisions]
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Resolution:
        """A resolution a report printed (its JSON): `hub_unreachable` is not printed (it is one of the notes), so
        it reads back as None and the JSON it writes is the same."""
        return cls(**{**data, "decisions": tuple(VariantDecision(**x) for x in data["decisions"]),
                      "notes": tuple(data["notes"])})



_HEX40 = re.compile(r"^[0-9a-f]{40}$")

# ---------------------------------------------------------------------------------------------------------------
# Variant listing and resolution with kernels' own code
# ---------------------------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """The cache kernels uses: KERNELS_CACHE, else the Hugging Face hub cache."""
    if os.environ.get("KERNELS_CACHE"):
        return Path(os.environ["KERNELS_CACHE"])
    from huggingface_hub import constants

    return Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE)


def local_kernels() -> dict[str, Path]:
    """LOCAL_KERNELS="org/a=/path:org/b=/path2", parsed as kernels parses it."""
    raw = os.environ.get("LOCAL_KERNELS")
    if not raw:
        return {}
    out = {}
    for entry in raw.split(":"):
        if "=" in entry:
            repo, path = entry.split("=", 1)
            out[repo] = Path(path)
    return out


def _repo_folders(repo_id: str) -> list[Path]:
    from huggingface_hub.file_download import repo_folder_name

    base = cache_dir()
    # kernels reads both layouts: the "kernel" repo type (kernels--org--name) and the legacy "model" one
    return [base / repo_folder_name(repo_id=repo_id, repo_type=t) for t in ("kernel", "model")]


def _cache_snapshot(repo_id: str, version: int | None,
                    revision: str | None) -> tuple[Path | None, str | None, str | None, str]:
    """(snapshot dir, ref, commit, why-not) for a repo in the HF cache."""
    ref = f"v{version}" if version is not None else revision
    for folder in _repo_folders(repo_id):
        if not folder.is_dir():
            continue
        commit = None
        if ref and (folder / "refs" / ref).is_file():
            commit, damaged = hf_cache_entries.read_ref(folder / "refs" / ref)
            if damaged:
                return None, ref, None, damaged
        elif revision and _HEX40.match(revision):
            commit = revision
        if commit is None:
            refs = sorted(p.name for p in (folder / "refs").iterdir()) if (folder / "refs").is_dir() else []
            return None, ref, None, (f"{folder} has no ref {ref} (refs: {', '.join(refs) or 'none'})")
        snap = folder / "snapshots" / commit
        if not snap.is_dir():
            return None, ref, commit, f"{folder} has ref {ref} -> {commit[:12]} but no snapshot for it"
        return snap, ref, commit, ""
    return None, ref, None, f"not in the cache ({_repo_folders(repo_id)[0]})"


def incomplete_snapshot(snapshot: Path, commit: str) -> tuple[Path, list[str]]:
    """(tree listing file, files it names that `snapshot` lacks). huggingface_hub >= 2.x caches the full tree
    of a commit in `trees/COMMIT.json` on download; offline, `snapshot_download(local_files_only=True)` without
    allow_patterns - which is how kernels looks up a cached kernel - raises IncompleteSnapshotError when any
    listed file is missing. A one-variant download leaves every other variant missing."""
    tree = snapshot.parent.parent / "trees" / f"{commit}.json"
    files, _damaged = hf_cache_entries.tree_problem(tree)  # a damaged listing: _cache_resolution says so
    missing = [f for f in files or () if not (snapshot / f).is_file()
               and not f.endswith(".pyc") and "__pycache__/" not in f]  # kernels ignores bytecode
    return tree, missing


def api() -> kernels_api.KernelsApi:
    """The adapter for the installed kernels release (kernels_api); raises KernelsUnusable with the reason."""
    got = kernels_api.adapter()
    if isinstance(got, kernels_api.Unsupported):
        raise KernelsUnusable(got.reason)
    return got


def _decide(variants: list[Any], target: HubSystem | None) -> tuple[list[VariantDecision], list[kernels_api.Decision],
                                                                   list[kernels_api.Decision]]:
    """kernels' resolver on a list of kernels variants; returns (decisions, accepted, rejected), kernels' order."""
    trace = api().resolve(variants, target.system() if target is not None else None)
    accepted = [d for d in trace if d.accepted]
    rejected = [d for d in trace if not d.accepted]
    out = [VariantDecision(d.info.variant, d.accepted, d.reason, chosen=bool(accepted) and d is accepted[0])
           for d in trace]
    return out, accepted, rejected


@dataclass(frozen=True)
class HubSystem:
    """The system to resolve for, when it is not this one (a docker build stage for another torch/CUDA).
    Fields left None are taken from this machine."""

    torch: str | None = None  # "2.11"
    cuda: str | None = None  # "13.0"; "" for a CPU build
    cxx11abi: bool | None = None
    cpu: str | None = None
    os: str | None = None

    def system(self) -> kernels_api.System:
        def pair(text: str | None) -> tuple[int, int] | None:
            if not text:
                return None
            major, minor = text.split(".")[:2]
            return int(major), int(minor)

        return kernels_api.System(torch=pair(self.torch), cuda=pair(self.cuda), cpu_build=self.cuda == "",
                                  cxx11abi=self.cxx11abi, cpu=self.cpu, os=self.os)


def _system(target: HubSystem | None = None) -> dict[str, Any]:
    """This machine as kernels sees it, or the `target` (for the nearest-variant ranking)."""
    if target is not None and (target.torch or target.cuda is not None):
        base = _system()
        sysv = target.system()
        if sysv.torch:
            base["torch"] = sysv.torch
        if sysv.cuda is not None:
            base.update(backend="cuda", cuda=sysv.cuda)
        elif sysv.cpu_build:
            base.update(backend="cpu", cuda=None)
        return base

    try:
        import torch

        major, minor = (environment.torch_minor(torch.__version__) or "").split(".")
        torch_mm: tuple[int, int] | None = (int(major), int(minor))
        abi: bool | None = bool(torch.compiled_with_cxx11_abi())
    except Exception:  # noqa: BLE001
        torch_mm, abi = None, None
    return {"cpu": platform.machine(), "os": platform.system().lower(), "torch": torch_mm, "abi": abi,
            **api().this_system()}


def _nearest(rejected: list[kernels_api.Decision], target: HubSystem | None = None) -> tuple[str | None, str | None]:
    return nearest(rejected, _system(target)) if rejected else (None, None)


def _minver_problem(minver: Any, variant: str) -> str | None:
    """The RuntimeError kernels raises when the installed kernels is older than the variant's kernels_minver."""
    kv = environment.dist_version("kernels")
    if minver is not None and kv:
        from packaging.version import Version

        try:
            if Version(kv).release < Version(str(minver)).release:
                return f"variant {variant} requires kernels>={minver}, installed {kv}: kernels raises RuntimeError"
        except Exception:  # noqa: BLE001
            pass
    return None


def _arch_problem(archs: Iterable[str], variant: str, capabilities: Iterable[Capability]) -> str | None:
    """The RuntimeError kernels' arch check raises when a CUDA variant is not built for one of this machine's GPUs."""
    supports = api().capability_check()
    if supports is None:
        return None
    for cap in capabilities:
        if not supports(list(archs), (cap.major, cap.minor)):
            return (f"variant {variant} is built for {', '.join(archs)}, not for this GPU's {cap.sm}: "
                    "kernels' arch check raises RuntimeError (load fails, no fallback)")
    return None


def _check_variant(meta_path: Path, variant: str, env: environment.Environment | None) -> str | None:
    """What kernels' validators would raise for the chosen variant (RuntimeError: not a silent fallback)."""
    if not meta_path.is_file():
        return None
    try:
        meta = api().read_metadata(meta_path)
    except LayoutError:
        return None
    except Exception as exc:  # noqa: BLE001
        return f"metadata.json of {variant} does not parse: {exc}"
    problem = _minver_problem(meta.kernels_minver, variant)
    if problem is not None:
        return problem
    if meta.archs and env is not None and env.capabilities and meta.backend == "cuda":
        return _arch_problem(meta.archs, variant, env.capabilities)
    return None


def _local_resolution(repo_id: str, version: int | None, revision: str | None, path: Path,
                      env: environment.Environment | None, target: HubSystem | None) -> Resolution:
    """LOCAL_KERNELS answers first (kernels reads it before the Hub and the cache)."""
    variants = api().list_local(path)
    base = path
    if not variants or not _decide(variants, target)[1]:
        more = api().list_local(path / "build")
        if more:
            variants, base = more, path / "build"
    decisions, accepted, rejected = _decide(variants, target)
    near, match = (None, None) if accepted else _nearest(rejected, target)
    chosen = accepted[0].info.variant if accepted else None
    problem = _check_variant(base / chosen / "metadata.json", chosen, env) if chosen else None
    return Resolution(repo_id, version, revision, "LOCAL_KERNELS", str(path), None, None, tuple(decisions),
                      chosen, near, match, problem,
                      None if variants else f"LOCAL_KERNELS points {repo_id} at {path}, which holds no build variant",
                      ("LOCAL_KERNELS overrides the Hub for this repository (kernels reads it first)",))


def resolve_repo(repo_id: str, *, version: int | None = None, revision: str | None = None,
                 source: str = "auto", env: environment.Environment | None = None,
                 target: HubSystem | None = None) -> Resolution:
    """Which variant of `repo_id` kernels would load here, listed the way kernels would list it.

    source: "auto" follows kernels (LOCAL_KERNELS, then the HF cache when offline or the Hub when online;
    if the Hub cannot be reached, the cache answers with a note); "cache" never uses the network; "hub" asks
    the Hub (an error when offline). A kernels release no adapter fits gives a Resolution with `unusable` set.
    """
    try:
        return _resolve(repo_id, version, revision, source, env, target)
    except (KernelsUnusable, LayoutError) as exc:
        reason = str(exc) if isinstance(exc, KernelsUnusable) else (
            f"kernels {environment.dist_version('kernels')} does not have {exc}, which its release generation "
            "has: Hub variants not listed")
        return Resolution(repo_id, version, revision, "none", None, error=reason, unusable=reason)


def _resolve(repo_id: str, version: int | None, revision: str | None, source: str,
             env: environment.Environment | None, target: HubSystem | None) -> Resolution:
    api()  # the adapter first: an unknown layout is said once, before any listing
    locals_ = local_kernels()
    if repo_id in locals_ and source in ("auto", "cache"):
        return _local_resolution(repo_id, version, revision, locals_[repo_id], env, target)
    use_hub = source == "hub" or (source == "auto" and not hub_offline())
    if use_hub:
        if hub_offline():
            return Resolution(repo_id, version, revision, "none", None,
                              error="the Hub may not be used (HF_HUB_OFFLINE/KERNELCHECK_OFFLINE is set)")
        limit = network_timeout()  # a bad KERNELCHECK_NETWORK_TIMEOUT is BadInput, not a Hub that failed
        try:
            from kernelcheck.core.models import bounded

            return bounded(lambda: _resolve_hub(repo_id, version, revision, env, target),
                           f"the Kernel Hub listing of {repo_id} ({hub_api().endpoint})", limit)
        except Exception as exc:  # noqa: BLE001 - the cache may still answer
            msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if source == "hub":
                return Resolution(repo_id, version, revision, "none", "hub",
                                  error=f"the Hub could not be asked ({msg})")
            return _cache_resolution(repo_id, version, revision, env, target, f"the Hub could not be asked ({msg})")
    return _cache_resolution(repo_id, version, revision, env, target, None)


def _kernels_says(repo_id: str, version: int | None) -> str:
    """kernels' own offline version lookup for `version` (its ValueError text), or "" when it resolves."""
    if version is None or not hub_offline():
        return ""
    try:
        err = api().offline_version_error(repo_id, version)
    except (KernelsUnusable, LayoutError):
        return ""
    return f"kernels' own lookup raises ValueError: {err.splitlines()[0]}" if err else ""


def _cache_resolution(repo_id: str, version: int | None, revision: str | None, env: environment.Environment | None,
                      target: HubSystem | None, hub_failed: str | None) -> Resolution:
    """The Hugging Face cache's answer; `hub_failed`: why the Hub was not asked first ("the Hub could not be asked
    (ConnectError: ...)"), None where it was not to be asked. Where the cache holds nothing either, the error is
    one sentence with both reasons. A damaged entry (a file the listing cannot read: OSError, not UTF-8, nested past
    reading) is the Resolution's error naming the folder, never an exception that ends a gate as exit 1."""
    try:
        return _cache_answer(repo_id, version, revision, env, target, hub_failed)
    except (OSError, ValueError, RecursionError) as exc:
        folder = next((f for f in _repo_folders(repo_id) if f.is_dir()), _repo_folders(repo_id)[0])
        where = getattr(exc, "filename", None) or folder
        return Resolution(repo_id, version, revision, "none", str(cache_dir()), error=(
            f"{where} cannot be read ({type(exc).__name__}: {str(exc)[:100]}): a damaged cache entry; "
            f"{hf_cache_entries.REPAIR}"))


def _cache_answer(repo_id: str, version: int | None, revision: str | None, env: environment.Environment | None,
                  target: HubSystem | None, hub_failed: str | None) -> Resolution:
    snap, ref, commit, why = _cache_snapshot(repo_id, version, revision)
    if snap is None:
        hint = "offline (HF_HUB_OFFLINE)" if hub_offline() else (hub_failed or "the Hub was not asked")
        said = _kernels_says(repo_id, version)
        return Resolution(repo_id, version, revision, "none", str(cache_dir()), ref, commit,
                          error=f"{why}; {hint}", kernels_error=said or None)
    hub_note = f"{hub_failed}; the Hugging Face cache answered instead" if hub_failed else None
    notes = [hub_note] if hub_note else []
    variants = api().list_local(snap / "build")
    decisions, accepted, rejected = _decide(variants, target)
    near, match = (None, None) if accepted else _nearest(rejected, target)
    chosen = accepted[0].info.variant if accepted else None
    problem = _check_variant(snap / "build" / chosen / "metadata.json", chosen, env) if chosen else None
    blocked = None
    tree, missing = incomplete_snapshot(snap, commit or "")
    damaged = hf_cache_entries.tree_problem(tree)[1]
    if damaged:
        return Resolution(repo_id, version, revision, "none", str(snap), ref, commit, error=damaged)
    if accepted and missing:
        blocked = (f"huggingface_hub's cached listing {tree} names {len(missing)} file(s) this snapshot lacks "
                   f"(e.g. {missing[0]}), so offline kernels' cache lookup raises 'Cannot find a local snapshot' "
                   "and kernelize keeps the torch forward; `kernelcheck hub --prefetch` repairs it")
    notes.append("the cache holds only the variants downloaded so far; the Hub may have more")
    return Resolution(repo_id, version, revision, "hf-cache", str(snap), ref, commit, tuple(decisions),
                      chosen, near, match, problem,
                      None if variants else f"{snap / 'build'} holds no build variant", tuple(notes), blocked,
                      hub_unreachable=hub_note)


def hub_api() -> Any:
    """kernelcheck's own Hub client (huggingface_hub). Not kernels' `_get_hf_api`: with
    HF_HUB_DISABLE_TELEMETRY=1 that one sends an invalid User-Agent (see `kernels_client_problem`)."""
    from huggingface_hub import HfApi, get_session

    from kernelcheck.core.version import __version__

    limit = network_timeout()
    try:  # huggingface_hub's client waits forever by default: every connect and read gets the network timeout
        get_session().timeout = limit
    except Exception:  # noqa: BLE001 - another client: the bounded() callers still end the wait
        pass
    return HfApi(library_name="kernelcheck", library_version=__version__)


def kernels_client_problem() -> str | None:
    """Whether kernels' own Hub client can send a request at all, asked from the installed packages.

    kernels 0.17.2 builds its User-Agent as "; ".join(parts) and, with HF_HUB_DISABLE_TELEMETRY=1, passes an
    empty string that huggingface_hub appends as "...; " - a header value with trailing whitespace, which
    httpx refuses (LocalProtocolError) before anything is sent."""
    try:
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]  # not in its __all__

        client = api().hf_api()
        ua = build_hf_headers(token=False, library_name=client.library_name, library_version=client.library_version,
                              user_agent=client.user_agent).get("user-agent", "")
    except Exception:  # noqa: BLE001 - cannot tell: say nothing
        return None
    if ua != ua.strip():
        return (f"kernels' Hub client sends the User-Agent {ua!r}, whose trailing whitespace httpx refuses "
                "(LocalProtocolError): every Hub request kernels makes fails"
                + (" - caused by HF_HUB_DISABLE_TELEMETRY=1" if os.environ.get("HF_HUB_DISABLE_TELEMETRY") else ""))
    return None


def _hub_versions(api: Any, repo_id: str) -> dict[int, Any]:
    """Branches vN -> GitRefInfo, as kernels' `_get_available_versions` reads them."""
    refs = api.list_repo_refs(repo_id=repo_id, repo_type="kernel")
    out = {}
    for b in refs.branches:
        if b.name.startswith("v") and b.name[1:].isdigit():
            out[int(b.name[1:])] = b
    return out


def _resolve_hub(repo_id: str, version: int | None, revision: str | None,
                 env: environment.Environment | None, target: HubSystem | None) -> Resolution:
    hub = hub_api()
    ref, commit = revision, None
    if version is not None:
        versions = _hub_versions(hub, repo_id)
        info = versions.get(version)
        if info is None:
            avail = ", ".join(f"v{v}" for v in sorted(versions)) or "none"
            return Resolution(repo_id, version, revision, "hub", "hub", f"v{version}",
                              error=f"the Hub repository has no version v{version} (versions: {avail})")
        ref, commit = f"v{version}", info.target_commit
    rev = commit or revision or "main"
    variants = api().list_hub(hub, repo_id, rev)
    decisions, accepted, rejected = _decide(variants, target)
    near, match = (None, None) if accepted else _nearest(rejected, target)
    return Resolution(repo_id, version, revision, "hub", f"{hub.endpoint}/kernels/{repo_id}", ref,
                      commit if commit else (revision if revision and _HEX40.match(revision) else None),
                      tuple(decisions), accepted[0].info.variant if accepted else None, near, match, None,
                      None if variants else "the Hub repository lists no build variant")


