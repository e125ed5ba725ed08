"""`kernelcheck hub --model M --bundle FILE`: one file that makes a job's Kernel Hub load succeed on an air-gapped
node, built where the Hub is reachable (a docker build stage, a login node).

FILE is a gzip'd tar holding:
    kernelcheck-bundle.json   the manifest (schema kernelcheck.hub-bundle/1): per repository the load resolves,
                              repo@version -> commit, the variant chosen for the target and why the others lost,
                              every file with its sha256, kernels' digest and signature checks, the signature
                              receipt, the publisher trust status, the redirect, the kernel dependencies, and the
                              environment the job needs
    cache/                    the Hugging Face cache layout kernels reads offline (kernels--ORG--NAME/refs/vN,
                              snapshots/COMMIT/build/VARIANT/...), with kernels' receipt store (.verified-kernels)
    local/                    LOCAL_KERNELS folders, where the build machine had any
    kernels.lock              the pins in kernels' own lock format

Unpacked anywhere, `KERNELS_CACHE=DIR/cache` (or `HF_HUB_CACHE=DIR/cache`) with `HF_HUB_OFFLINE=1` is what the job
needs; `kernelcheck hub --verify-bundle FILE` checks it on the node (bundle_verify.py). Every check is kernels' own,
run in a child process pointed at the staging folder (bundle_probe.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcheck.core import lifeline
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Finding, Severity, Verdict

if TYPE_CHECKING:
    from kernelcheck.core.environment import Environment
    from kernelcheck.core.matrix import Matrix
    from kernelcheck.integrations.kernels_hub import HubSystem, Resolution
    from kernelcheck.integrations.transformers_hub import HubRepo

SCHEMA = "kernelcheck.hub-bundle/1"
MANIFEST = "kernelcheck-bundle.json"
RepoSpec = tuple[str, int | None, str | None]


def load_repos(model: str | None, mode: str, device: str, capability: int | None, *, m: Matrix) -> list[HubRepo]:
    """The repositories the model's load resolves: the Hub prediction's own list (kernels_prefetch.model_repos),
    asked through this one call."""
    if not model:
        return []
    from kernelcheck.integrations import kernels_prefetch, transformers_models

    resolved = transformers_models.resolve(model, m=m)
    return kernels_prefetch.model_repos(kernels_prefetch.modeling_module(resolved.spec.module),
                                        tuple(resolved.spec.functions), mode, device, capability,
                                        model_type=resolved.model_type, m=m)


@dataclass
class BundleReport:
    """What --bundle and --verify-bundle print: the manifest's entries with each check, and the findings."""

    action: str  # bundle | verify-bundle
    file: str
    manifest: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)  # verify: per entry, what was checked offline
    kernels: str | None = None

    @property
    def exit_code(self) -> int:
        from kernelcheck.core.status import EXIT_CODE

        return EXIT_CODE[Verdict(self.verdict)]

    @property
    def verdict(self) -> str:
        from kernelcheck.core.decide import verdict

        return str(verdict([], self.findings))

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "command": "hub", "action": self.action, "verdict": self.verdict,
                "exit_code": self.exit_code, "file": self.file, "kernels": self.kernels,
                "model": self.manifest.get("model"), "mode": self.manifest.get("mode"),
                "device": self.manifest.get("device"), "target": self.manifest.get("target"),
                "required": self.manifest.get("required", []), "entries": self.manifest.get("entries", []),
                "job_environment": self.manifest.get("job_environment", {}), "checks": self.checks,
                "findings": [finding_json(f) for f in self.findings]}

    def render(self, as_json: bool) -> str:
        if as_json:
            return json.dumps(self.to_json(), indent=2, default=str)
        from kernelcheck.hub.bundle_text import render

        return render(self)


def finding_json(f: Finding) -> dict[str, Any]:
    return {"id": f.id, "severity": str(f.severity), "message": f.message, "fix": f.fix, "reference": f.reference}


# ---------------------------------------------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------------------------------------------


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(root: Path, variant_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): _sha256(p) for p in sorted(variant_dir.rglob("*")) if p.is_file()}


def _stage(r: Resolution, cache: Path, local: Path) -> tuple[Path, str]:
    """Put the chosen variant of `r` into the staging cache (or local/ for LOCAL_KERNELS). (variant dir, how)."""
    from huggingface_hub.file_download import repo_folder_name

    from kernelcheck.integrations import kernels_hub

    assert r.chosen is not None
    if r.source == "LOCAL_KERNELS" and r.location:
        src = Path(r.location)
        src = src / "build" / r.chosen if (src / "build" / r.chosen).is_dir() else src / r.chosen
        dest = local / r.repo_id.replace("/", "--") / "build" / r.chosen
        shutil.copytree(src, dest, symlinks=False, dirs_exist_ok=True)
        return dest, f"copied from LOCAL_KERNELS ({src})"
    assert r.commit is not None
    folder = cache / repo_folder_name(repo_id=r.repo_id, repo_type="kernel")
    if r.source == "hf-cache" and r.location:
        src = Path(r.location) / "build" / r.chosen
        dest = folder / "snapshots" / r.commit / "build" / r.chosen
        shutil.copytree(src, dest, symlinks=False, dirs_exist_ok=True)  # the cache's links, as files
        how = f"copied from the Hugging Face cache ({src})"
    else:
        hub = kernels_hub.hub_api()
        hub.snapshot_download(r.repo_id, repo_type="kernel", revision=r.ref or r.commit,
                              allow_patterns=[f"build/{r.chosen}/*"],
                              ignore_patterns=kernels_hub.api().bytecode_ignore_patterns() or None, cache_dir=cache)
        dest = folder / "snapshots" / r.commit / "build" / r.chosen
        how = f"downloaded from {hub.endpoint} at {r.ref or r.commit}"
    if r.ref:
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / r.ref).write_text(r.commit)
    tree, missing = kernels_hub.incomplete_snapshot(folder / "snapshots" / r.commit, r.commit)
    if missing:  # the other variants' listing would make kernels' offline lookup refuse the snapshot
        tree.unlink()
    return dest, how


def run_probe(cache: Path, entries: list[dict[str, Any]], target: dict[str, Any] | None, *, online: bool,
              extra_env: dict[str, str] | None = None, receipts_only: bool = False) -> dict[str, Any]:
    """bundle_probe in a child process whose kernels cache is `cache` (nothing of this machine's caches is used)."""
    env = dict(os.environ)
    env.update({"KERNELS_CACHE": str(cache), "HF_HUB_CACHE": str(cache), "PYTHONDONTWRITEBYTECODE": "1"})
    if not online:
        env["HF_HUB_OFFLINE"] = "1"
    env.update(extra_env or {})
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([p for p in (env.get("PYTHONPATH"), root) if p])
    with tempfile.TemporaryDirectory(prefix="kernelcheck-bundle-") as tmp:
        req = Path(tmp) / "request.json"
        req.write_text(json.dumps({"online": online, "target": target, "entries": entries,
                                   "receipts_only": receipts_only}), encoding="utf-8")
        res = subprocess.run([sys.executable, "-m", "kernelcheck.hub.bundle_probe", str(req)], capture_output=True,
                             text=True, env=env, preexec_fn=lifeline.preexec(), timeout=600)
    if res.returncode != 0 or not res.stdout.strip():
        return {"error": f"kernels' checks did not run (exit {res.returncode}): {res.stderr.strip()[-400:]}",
                "entries": []}
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def _target_json(target: HubSystem | None, env: Environment) -> dict[str, Any]:
    """The system the variants are chosen for: the --torch/--cuda target, else this machine's torch build."""
    from kernelcheck.core import environment
    from kernelcheck.integrations import kernels_hub

    here = environment.torch_minor(env.torch.version if env.torch else None)
    torch_mm = target.torch if target and target.torch else here
    if target is not None and target.cuda is not None:
        cuda: str | None = target.cuda
    else:
        sysv = kernels_hub.api().this_system()
        cuda = "" if sysv["backend"] == "cpu" else (f"{sysv['cuda'][0]}.{sysv['cuda'][1]}" if sysv["cuda"] else None)
    return {"torch": torch_mm, "cuda": cuda}


@dataclass(frozen=True)
class BuildRequest:
    file: str
    model: str | None
    mode: str
    device: str
    capability: int | None
    repos: tuple[RepoSpec, ...] = ()


def build(req: BuildRequest, env: Environment, target: HubSystem | None, *, m: Matrix,
          say: Callable[[str], None] = lambda s: None) -> BundleReport:
    from kernelcheck.integrations import kernels_hub
    from kernelcheck.integrations.transformers_hub import HubRepo

    out = Path(req.file)
    if out.is_dir():
        raise BadInput(f"--bundle {req.file} is a folder: name the file to write, e.g. {out / 'kernels.tar.gz'}.")
    kernels_hub.api()  # no usable kernels: KernelsUnusable, said by the caller
    repos = list(load_repos(req.model, req.mode, req.device, req.capability, m=m))
    repos.extend(HubRepo(r, "", v, rev) for r, v, rev in req.repos)
    tjson = _target_json(target, env)
    from kernelcheck.integrations.kernels_hub import HubSystem as _HS

    system = _HS(torch=tjson["torch"], cuda=tjson["cuda"])
    entries: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kernelcheck-bundle-") as tmp:
        stage = Path(tmp)
        cache, local = stage / "cache", stage / "local"
        cache.mkdir()
        pending = [(r.repo_id, r.version, r.revision, r.layer_name or "") for r in repos]
        seen: set[tuple[str, int | None, str | None]] = set()
        while pending:
            batch = []
            for repo_id, version, revision, why in pending:
                if (repo_id, version, revision) in seen:
                    continue
                seen.add((repo_id, version, revision))
                say(f"resolving {repo_id}@{'v' + str(version) if version is not None else revision}")
                res = kernels_hub.resolve_repo(repo_id, version=version, revision=revision, env=env, target=system)
                batch.append(_entry(res, why, cache, local, stage, env))
            entries.extend(batch)
            pending = _probe_batch(cache, [e for e in batch if e["status"] == "bundled"], tjson, stage)
            pending = [p for p in pending if (p[0], p[1], p[2]) not in seen]
        manifest = _manifest(req, tjson, entries, stage)
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        _lock(stage, entries)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            with tarfile.open(out, "w:gz") as tar:
                for name in (MANIFEST, "kernels.lock", "cache", "local"):
                    if (stage / name).exists():
                        tar.add(stage / name, arcname=name)
        except OSError as exc:
            raise BadInput(f"--bundle {req.file} cannot be written ({type(exc).__name__}: {exc}): name a file in a "
                           "folder you can write to.") from None
    from kernelcheck.core import environment

    report = BundleReport("bundle", str(out), manifest, build_findings(manifest),
                          kernels=environment.dist_version("kernels"))
    return report


def _entry(res: Resolution, why: str, cache: Path, local: Path, stage: Path, env: Environment) -> dict[str, Any]:
    e: dict[str, Any] = {"repo_id": res.repo_id, "version": res.version, "revision": res.revision, "ref": res.ref,
                         "commit": res.commit, "variant": res.chosen, "source": res.source, "required_by": why,
                         "why": _why(res), "files": {}, "status": "missing", "how": ""}
    if res.error or not res.chosen:
        e["how"] = res.error or f"no build variant for the target (nearest {res.nearest})"
        return e
    if res.problem:
        e["problem"] = res.problem
    try:
        dest, how = _stage(res, cache, local)
    except Exception as exc:  # noqa: BLE001 - a download that failed is an entry left out, said in the report
        e["how"] = f"could not be fetched: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return e
    e.update(status="bundled" if res.source != "LOCAL_KERNELS" else "local", how=how,
             files=_files(stage, dest))
    if not res.problem:  # listed from the Hub: kernels' minimum-version and arch checks on the downloaded metadata
        from kernelcheck.integrations import kernels_hub

        problem = kernels_hub._check_variant(dest / "metadata.json", res.chosen, env)
        if problem:
            e["problem"] = problem
    return e


def _why(res: Resolution) -> dict[str, Any]:
    """The variant chosen and why: kernels' resolver's decision for every variant it listed."""
    return {"listed_from": res.source, "chosen": res.chosen,
            "rejected": {d.variant: d.reason for d in res.decisions if not d.accepted},
            "accepted_not_first": [d.variant for d in res.decisions if d.accepted and not d.chosen]}


def _probe_batch(cache: Path, batch: list[dict[str, Any]], tjson: dict[str, Any],
                 stage: Path) -> list[tuple[str, int | None, str | None, str]]:
    """kernels' checks of the newly staged entries (online where the Hub may be used); their kernel deps."""
    from kernelcheck.core.settings import hub_offline

    if not batch:
        return []
    keys = ("repo_id", "version", "revision", "commit", "variant")
    held = _receipts_held([e for e in batch if e["source"] == "hf-cache"])
    got = run_probe(cache, [{**{k: e[k] for k in keys}, "store_receipt": (e["repo_id"], e["variant"]) in held}
                            for e in batch], tjson, online=not hub_offline())
    by_key = {(p["repo_id"], p.get("version"), p["variant"]): p for p in got.get("entries", [])}
    deps: list[tuple[str, int | None, str | None, str]] = []
    for e in batch:
        p = by_key.get((e["repo_id"], e["version"], e["variant"]), {})
        if got.get("error"):
            e["checks_error"] = got["error"]
        for key in ("digest", "signature", "receipt", "trust", "redirect"):
            e[key] = p.get(key)
        if e.get("trust") is None:
            e["trust"] = {"status": "skipped", "detail": "not checked: the Hub may not be used (offline)"}
        if e.get("redirect") is None:
            e["redirect"] = {"status": "skipped", "detail": "not checked: the Hub may not be used (offline)"}
        e["depends"] = p.get("depends")
        for repo_id, version, revision in p.get("depends") or []:
            deps.append((repo_id, version, revision, f"a kernel dependency of {e['repo_id']}"))
        # the receipts kernels wrote while checking are part of the files now
        receipts = cache / ".verified-kernels"
        if receipts.is_dir():
            e["receipts_dir"] = str(receipts.relative_to(stage))
    return deps


def _receipts_held(entries: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The variants copied from this machine's cache whose signature kernels verified there before (its receipt
    store holds a receipt): the bundle carries the receipt, which is what lets kernels' check pass offline."""
    from kernelcheck.integrations import kernels_hub

    if not entries:
        return set()
    got = run_probe(kernels_hub.cache_dir(), [{k: e[k] for k in ("repo_id", "version", "revision", "commit",
                                                                  "variant")} for e in entries], None,
                    online=False, receipts_only=True)
    return {(p["repo_id"], p["variant"]) for p in got.get("entries", []) if p.get("receipt") == "ok"}


def _dep_tree(entries: list[dict[str, Any]], repo_id: str, seen: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`kernels info --dep-tree`'s shape: {dependency: {its dependencies}}, from each variant's metadata."""
    e = next((x for x in entries if x["repo_id"] == repo_id), None)
    if e is None or repo_id in seen:
        return {}
    return {d[0]: _dep_tree(entries, d[0], seen | {repo_id}) for d in e.get("depends") or []}


def _manifest(req: BuildRequest, tjson: dict[str, Any], entries: list[dict[str, Any]],
              stage: Path) -> dict[str, Any]:
    from kernelcheck.core import environment
    from kernelcheck.core.version import __version__

    for e in entries:
        e["dependency_tree"] = _dep_tree(entries, e["repo_id"])
    local = [e for e in entries if e["status"] == "local"]
    job_env = {"HF_HUB_OFFLINE": "1", "KERNELS_CACHE": "<DIR>/cache",
               "note": "DIR is the folder the bundle is unpacked into (tar xzf FILE -C DIR); HF_HUB_CACHE=<DIR>/cache "
                       "works too, but then the model itself must be a local folder or in that cache"}
    if local:
        job_env["LOCAL_KERNELS"] = ":".join(f"{e['repo_id']}=<DIR>/local/{e['repo_id'].replace('/', '--')}"
                                           for e in local)
    return {"schema": SCHEMA, "kernelcheck": __version__, "kernels": environment.dist_version("kernels"),
            "model": req.model, "mode": req.mode, "device": req.device, "target": tjson,
            "required": [f"{e['repo_id']}@{'v' + str(e['version']) if e['version'] is not None else e['revision']}"
                         for e in entries],
            "entries": entries, "job_environment": job_env}


def _lock(stage: Path, entries: list[dict[str, Any]]) -> None:
    from kernelcheck.integrations import kernels_hub

    pins = [(e["repo_id"], e["version"], e["revision"], e["commit"]) for e in entries
            if e["status"] == "bundled" and e["commit"]]
    if pins:
        try:
            (stage / "kernels.lock").write_text(kernels_hub.api().lock_text(pins), encoding="utf-8")
        except Exception:  # noqa: BLE001 - the lock is a convenience: the refs in cache/ are what kernels reads
            pass


def build_findings(manifest: dict[str, Any]) -> list[Finding]:
    """What the build knows already: repositories it could not put in the bundle (the offline load raises)."""
    out = []
    for e in manifest["entries"]:
        spec = f"{e['repo_id']}@{'v' + str(e['version']) if e['version'] is not None else e['revision']}"
        if e["status"] == "missing":
            out.append(Finding("hub-bundle-missing", Severity.BROKEN,
                               f"{spec} ({e['required_by'] or 'asked for'}) is not in the bundle: {e['how']}. "
                               "Offline, the job's load raises for it.",
                               "run the build where the Hub is reachable, for the job's --torch/--cuda"))
        elif e.get("problem"):
            out.append(Finding("hub-bundle-variant", Severity.BROKEN, f"{spec}: {e['problem']}",
                               "build for the job's GPUs and torch: --arch X.Y --torch T --cuda C"))
        elif (e.get("digest") or {}).get("status") == "failed":
            out.append(Finding("hub-bundle-digest", Severity.BROKEN,
                               f"{spec}/{e['variant']}: kernels' digest check fails on the downloaded files ("
                               f"{' '.join(str(e['digest'].get('detail')).split())}): kernels raises at load",
                               "report it to the repository's publisher; do not ship this build"))
    return out
