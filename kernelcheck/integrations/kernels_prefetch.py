"""Pre-fetch the Hub builds kernels would choose, write kernels.lock, and check what was applied after loading."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcheck.core import environment, jsonout
from kernelcheck.core.plan_step import Rejected, RejectKind, Step, StepKind
from kernelcheck.integrations.kernels_hub import (
    HubSystem,
    Resolution,
    api,
    hub_api,
    incomplete_snapshot,
    resolve_repo,
)
from kernelcheck.integrations.transformers_hub import HubRepo, select_entry, transformers_hub
from kernelcheck.integrations.transformers_load import hub_names, load_phases

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix

_HEX40 = re.compile(r"^[0-9a-f]{40}$")

# ---------------------------------------------------------------------------------------------------------------
# Pre-fetch and lock (for offline jobs)
# ---------------------------------------------------------------------------------------------------------------


def write_lock(resolutions: list[Resolution], path: str | os.PathLike[str]) -> Path:
    """Write a lock in kernels' own format (`KernelLocks.to_json`): repo + version -> commit.

    kernels reads it with `kernels.load_kernel(repo, lockfile=...)`, `LockedLayerRepository(...,
    lockfile=...)` and `kernels download DIR` (for DIR/kernels.lock)."""
    pins = [(r.repo_id, r.version, r.revision, r.commit) for r in resolutions if r.commit and _HEX40.match(r.commit)]
    text = api().lock_text(pins)  # kernels' own writer for its release (0.15: its JSON list)
    p = Path(path)
    if p.is_dir():
        p = p / "kernels.lock"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def _download(r: Resolution) -> str:
    """Download exactly the chosen variant. By ref (vN) so the cache also records refs/vN -> commit: an
    offline `LayerRepository(version=N)` needs that ref to find the snapshot."""
    kernels = api()
    hub = hub_api()
    return str(hub.snapshot_download(r.repo_id, repo_type="kernel", revision=r.ref or r.commit,
                                     allow_patterns=[f"build/{r.chosen}/*"],
                                     ignore_patterns=kernels.bytecode_ignore_patterns() or None,
                                     cache_dir=kernels.cache_dir()))


def _repair(snapshot: Path, r: Resolution) -> str:
    """Make a one-variant snapshot loadable offline by kernels: drop huggingface_hub's cached tree listing
    when it names files of *other* variants only (it is an optimisation for later downloads; without it the
    offline completeness check has nothing to compare and kernels gets the snapshot). Returns a note."""
    commit = snapshot.name
    tree, missing = incomplete_snapshot(snapshot, commit)
    if not missing:
        return ""
    own = f"build/{r.chosen}/"
    if any(m.startswith(own) for m in missing):
        return f"; WARNING: files of {r.chosen} itself are missing ({[m for m in missing if m.startswith(own)][:3]})"
    tree.unlink()
    return (f"; removed {tree} (it lists the {len(missing)} files of the other variants, which would make "
            "kernels' offline lookup call this snapshot incomplete)")


def _hub_step(package: str, action: str, spec: str, reason: str, command: str = "",
              rejected: tuple[Rejected, ...] = ()) -> Step:
    """A Kernel Hub plan step (source hub): no pip artifact; its action says what happened."""
    return Step(package, action, "hub", spec, reason, command, rejected, kind=StepKind.HUB)


def _prefetch_step(repo: HubRepo, r: Resolution, dry_run: bool, say: Callable[[str], None]) -> Step:
    """The plan step for one resolved repo: local, failed, missing, cached, download; a dry run says planned
    (would download) or skipped (the build could not be chosen) instead of attempting anything."""
    spec = f"{r.spec}/{r.chosen}" if r.chosen else r.spec
    if r.source == "LOCAL_KERNELS":
        return _hub_step(repo.repo_id, "local", spec, f"LOCAL_KERNELS points at {r.location}; nothing to download")
    if r.error and not r.chosen:  # a dry run tried nothing: the step is skipped, not failed
        return _hub_step(repo.repo_id, "skipped" if dry_run else "failed", spec,
                         f"not planned, the build could not be chosen: {r.error}" if dry_run else r.error,
                         "kernelcheck hub --prefetch (online, HF_HUB_OFFLINE unset)")
    if not r.chosen:
        return _hub_step(repo.repo_id, "missing", spec, f"no build variant for this system ({r.source}); nearest "
                         f"{r.nearest}, which would match {r.would_match}",
                         rejected=tuple(Rejected(d.variant, d.reason or "", kind=RejectKind.HUB_VARIANT)
                                        for d in r.decisions))
    if r.source == "hf-cache" and r.location:
        ok = (Path(r.location) / "build" / r.chosen / "metadata.json").is_file()
        fixed = _repair(Path(r.location), r) if ok and not dry_run else ""
        return _hub_step(repo.repo_id, "cached" if ok else "failed", spec,
                         f"already in the cache at {r.location}/build/{r.chosen}{fixed}" if ok
                         else f"the cached variant {r.chosen} is incomplete (no metadata.json)")
    if dry_run:
        return _hub_step(repo.repo_id, "planned", spec, f"kernels would choose {r.chosen} here")
    return _download_step(repo, r, spec, say)


def _download_step(repo: HubRepo, r: Resolution, spec: str, say: Callable[[str], None]) -> Step:
    """Download the chosen variant and repair its snapshot: a download step, or failed with the error."""
    assert r.chosen is not None
    try:
        say(f"downloading {spec}")
        where = _download(r)
        if not (Path(where) / "build" / r.chosen / "metadata.json").is_file():
            raise FileNotFoundError(f"the download finished but {where}/build/{r.chosen}/metadata.json is missing")
        fixed = _repair(Path(where), r)
        return _hub_step(repo.repo_id, "download", spec, f"kernels chooses {r.chosen} here; downloaded to {where} "
                         f"with ref {r.ref or r.commit}{fixed}")
    except Exception as exc:  # noqa: BLE001
        return _hub_step(repo.repo_id, "failed", spec, f"download failed: {type(exc).__name__}: {exc}")


def prefetch(repos: list[HubRepo], *, env: environment.Environment | None = None,
             lock_path: str | os.PathLike[str] | None = None, dry_run: bool = False,
             progress: Callable[[str], None] | None = None, target: HubSystem | None = None,
             offline_only: bool = False) -> list[Step]:
    """Pre-download the variant kernels would choose here for each repo, then write a kernels lock.

    Returns plan steps (kind hub: package, action, source "hub", spec, reason, command?) with action one of
    download (done), cached (already complete in the cache), planned (dry run: would download), skipped
    (dry run: the build could not be chosen, e.g. the Hub unreachable), missing (no variant for this
    system), failed (could not download/list). Offline it only verifies the cache."""
    steps: list[Step] = []
    done: list[Resolution] = []
    seen = set()
    for repo in repos:
        key = (repo.repo_id, repo.version, repo.revision)
        if key in seen:
            continue
        seen.add(key)
        say = progress or (lambda s: None)
        say(f"resolving {repo.spec}")
        r = resolve_repo(repo.repo_id, version=repo.version, revision=repo.revision, env=env, target=target,
                         source="cache" if offline_only else "auto")
        step = _prefetch_step(repo, r, dry_run, say)
        steps.append(step)
        if step.action in ("cached", "download"):
            done.append(r)
    if lock_path is not None and done and not dry_run:
        p = write_lock(done, lock_path)
        pins = ", ".join(f"{r.spec}={(r.commit or '?')[:12]}" for r in done)
        steps.append(_hub_step("kernels.lock", "lock", str(p), f"pins {pins} in kernels' lock format"))
    return steps


# ---------------------------------------------------------------------------------------------------------------
# After loading: was each Hub kernel really applied?
# ---------------------------------------------------------------------------------------------------------------


def _forward_state(mod: Any) -> tuple[bool, str]:
    fwd = getattr(mod, "forward", None)
    func = getattr(fwd, "__func__", None)
    cls_fwd = type(mod).forward
    applied = func is not None and func is not cls_fwd
    impl = func if func is not None else fwd
    name = f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', repr(impl))}"
    return applied, name


def _kernel_groups(model: Any, said: dict[str, str] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Walk the model's modules and group its Hub-named layers and kernel functions by (kind, name). `said`: kernels'
    own record (get_kernelized_layers, keyed "path" / "path:function"), which decides `applied` where it exists."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    seen_funcs: set[int] = set()

    def add(kind: str, name: str, where: str, mod: Any, key: str = "") -> None:
        applied, impl = _forward_state(mod)
        g = groups.setdefault((kind, name), {"name": name, "kind": kind, "modules": 0, "applied": 0,
                                             "implementations": [], "where": []})
        if said is not None:
            applied = key in said
            g.setdefault("repos", [])
            if applied and said[key] not in g["repos"]:
                g["repos"].append(said[key])
        g["modules"] += 1
        g["applied"] += int(applied)
        if impl not in g["implementations"]:
            g["implementations"].append(impl)
        if len(g["where"]) < 3:
            g["where"].append(where)

    for path, mod in model.named_modules():
        for fname, fmod in getattr(mod, "_kernel_funcs", {}).items():
            if id(fmod) in seen_funcs:
                continue
            seen_funcs.add(id(fmod))
            add("function", str(getattr(type(fmod), "kernel_layer_name", fname)), f"{path}._kernel_funcs[{fname}]",
                fmod, f"{path}:{fname}")
        lname = getattr(type(mod), "kernel_layer_name", None)
        if lname is not None:
            add("layer", str(lname), path or type(model).__name__, mod, path)
    return groups


def _kernels_record(model: Any) -> dict[str, str] | None:
    """kernels' own record of what it replaced, through the adapter; None without the API or without an adapter."""
    from kernelcheck.integrations import kernels_api

    got = kernels_api.adapter()
    if isinstance(got, kernels_api.Unsupported):
        return None
    try:
        return got.kernelized(model)
    except Exception:  # noqa: BLE001 - the forward check still answers
        return None


def applied_kernels(model: Any, expected: set[str] | None = None) -> list[dict[str, Any]]:
    """For a model loaded with `use_kernels=True` (or passed through `kernels.kernelize`): per Hub name,
    whether the Hub kernel replaced the torch forward.

    Layers: kernelize replaces the instance's `forward` (applied iff `m.forward.__func__ is not
    type(m).forward`; on a fallback kernels re-binds the class's own forward). Functions: with kernels usable,
    transformers' `use_kernel_func_from_hub_with_fallback` wraps each function in a kernels `Func` module
    (attached to layers as `_kernel_funcs`), whose forward kernelize replaces the same way. Empty when the
    classes carry no `kernel_layer_name` (transformers saw no usable `kernels`).

    Each row: {name, kind (layer|function), modules, applied (count), implementations, where, status}; status is
    applied | partly | original (the original forward kept) | missed (in `expected`, e.g. the names doctor
    found mapped for this device, but the original forward kept: the silent slow path). Where the installed kernels
    has `get_kernelized_layers` (0.19+, feature-detected through the kernels adapter), its record decides `applied`
    and each row also carries `repos` (the repositories the kernels came from) and `evidence`."""
    groups = _kernel_groups(model, _kernels_record(model))
    out = []
    for g in groups.values():
        g["evidence"] = "kernels.get_kernelized_layers" if "repos" in g else "forward identity"
        g["expected"] = bool(expected and g["name"] in expected)
        if g["applied"] == g["modules"]:
            g["status"] = "applied"
        elif g["applied"]:
            g["status"] = "partly"
        else:
            g["status"] = "missed" if g["expected"] else "original"
        out.append(g)
    return sorted(out, key=lambda g: (g["kind"], g["name"]))


def applied_lines(rows: list[dict[str, Any]], use_kernels: bool | None = None) -> list[str]:
    """Text lines for `applied_kernels` output."""
    if not rows:
        return ["no layer or function carries a Hub kernel name: transformers did not see a usable `kernels` "
                "(outside its version window, USE_HUB_KERNELS off, or not installed), so nothing could be applied"]
    out = []
    if use_kernels is False:
        out.append("model.use_kernels is False: kernelize was not run")
    for g in rows:
        word = {"applied": "APPLIED", "partly": "PARTLY", "original": "original", "missed": "MISSED"}[g["status"]]
        out.append(f"{word:<8} {g['kind']:<8} {g['name']}: {g['applied']}/{g['modules']} "
                   f"-> {', '.join(g['implementations'])}")
    return out


def to_json(obj: Any) -> str:
    return jsonout.dumps(obj, indent=2, default=str)


# ---------------------------------------------------------------------------------------------------------------
# Model-level entry points (used by `kernelcheck hub` and `kernelcheck install --source hub`)
# ---------------------------------------------------------------------------------------------------------------


def modeling_module(model_spec_module: str) -> str:
    """transformers' dotted modeling module for a model_type module name (qwen3_5 -> ...modeling_qwen3_5)."""
    return f"transformers.models.{model_spec_module}.modeling_{model_spec_module}"


@dataclass(frozen=True)
class LoadRepo:
    """One repository the whole load resolves: the layer or function it is for (`where` the load meets it), the
    phase (load: from_pretrained kernelizes for INFERENCE; train: model.train() kernelizes again for TRAINING) and
    the kernels mode of that phase."""

    name: str
    kind: str  # layer | function
    where: str
    phase: str  # load | train
    kernels_mode: str  # INFERENCE | TRAINING (what kernelize is called with)
    repo: HubRepo


def load_repos(modeling: str | None, functions: tuple[str, ...], mode: str, device: str,
               capability: int | None = None, *, model_type: str | None = None, m: Matrix) -> list[LoadRepo]:
    """Every (layer or function, phase) -> repository `from_pretrained` + `kernelize` resolve for the model on
    `device` (compute capability `capability`, e.g. 90) for a job of `mode`: the modeling file, the shared modules
    it reaches (activations through ACT2FN), INFERENCE at load and, for train jobs, TRAINING at model.train()."""
    th = transformers_hub(m=m)
    out: list[LoadRepo] = []
    for name, ln in hub_names(model_type, modeling, functions).items():
        entries = [e for e in th.mapping if e.name == name]
        for phase, phase_mode in load_phases(mode, th.eval_at_load):
            entry, _ = select_entry(entries, device, phase_mode, capability)
            if entry is not None:
                out.append(LoadRepo(name, ln.kind, ln.where, phase,
                                    "TRAINING" if phase_mode == "train" else "INFERENCE", entry.repo))
    return out


def model_repos(modeling: str, functions: tuple[str, ...], mode: str, device: str,
                capability: int | None = None, *, model_type: str | None = None, m: Matrix) -> list[HubRepo]:
    """The Hub repositories kernelize would load for this model on `device` for a job of `mode`, in every phase of
    the load (deduplicated): what a pre-fetch must put in the cache."""
    out: list[HubRepo] = []
    for lr in load_repos(modeling, functions, mode, device, capability, model_type=model_type, m=m):
        if all(r.spec != lr.repo.spec for r in out):
            out.append(lr.repo)
    return out


def prefetch_model(query: str, *, mode: str = "train", device: str | None = None,
                   lock_path: str | os.PathLike[str] | None = None, dry_run: bool = False,
                   env: environment.Environment | None = None,
                   progress: Callable[[str], None] | None = None,
                   target: HubSystem | None = None, offline_only: bool = False, m: Matrix) -> list[Step]:
    """`install --source hub`: pre-download the build kernels would choose here for every Hub kernel the
    model's layers/functions map to (for `device`, default from the torch build, and `mode`), and write a
    kernels lock at `lock_path`. `target` resolves for another torch/CUDA than this one (a build machine
    preparing a GPU image); `offline_only` never uses the network (verifies/repairs the cache). Returns plan
    steps (Step, kind hub). `m`: the matrix the model resolves in (a command's Context.matrix)."""
    from kernelcheck.core import gpu
    from kernelcheck.integrations import transformers_models

    env = env or environment.probe(m=m, packages=False)
    model = transformers_models.resolve(query, m=m)
    dev = gpu.default_device(env, device, target)
    repos = model_repos(modeling_module(model.spec.module), tuple(model.spec.functions), mode, dev,
                        gpu.capability_number(env), model_type=model.model_type, m=m)
    if not repos:
        return [_hub_step("-", "skip", "-", f"transformers maps no Hub kernel for {model.model_type}'s "
                          f"layers/functions on {dev} in {mode} mode: nothing to pre-fetch")]
    return prefetch(repos, env=env, lock_path=lock_path, dry_run=dry_run, progress=progress, target=target,
                    offline_only=offline_only)
