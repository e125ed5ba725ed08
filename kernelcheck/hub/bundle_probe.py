"""The checks of one air-gapped bundle's entries, run by the installed kernels in a child process whose
KERNELS_CACHE / HF_HUB_CACHE point at the bundle's cache folder (a staging folder when building, the unpacked copy
when verifying), so that kernels' cache lookups, receipt stores and validators see exactly the bundle and nothing
of this machine's caches is read or written.

    python -m kernelcheck.hub.bundle_probe REQUEST.json   ->  one JSON line on stdout

REQUEST: {"online": bool, "target": {torch, cuda, cxx11abi, cpu, os} | null, "entries": [{repo_id, version,
revision, commit, variant}]}. Every answer comes from kernels' own code through the adapter (kernels_api).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import KernelsUnusable, LayoutError
from kernelcheck.integrations.kernels_api.validation import Check


def _entry(a: Any, e: dict[str, Any], online: bool, target: Any) -> dict[str, Any]:
    from kernelcheck.integrations import kernels_hub

    repo_id, version, commit, variant = e["repo_id"], e.get("version"), e["commit"], e["variant"]
    out: dict[str, Any] = {"repo_id": repo_id, "version": version, "variant": variant}
    folder = [f for f in kernels_hub._repo_folders(repo_id) if f.is_dir()]
    snap = folder[0] / "snapshots" / commit if folder else None
    variant_path = snap / "build" / variant if snap is not None else None
    out["present"] = bool(variant_path is not None and (variant_path / "metadata.json").is_file())
    if version is not None:
        try:
            cached = a.cached_versions(repo_id)
        except Exception as exc:  # noqa: BLE001 - kernels' own reader failed: said, not raised
            cached = {}
            out["lookup_error"] = f"{type(exc).__name__}: {exc}"
        out["cached_commit"] = cached.get(int(version))
        out["latest_cached"] = max(cached) if cached else None
        out["latest_commit"] = cached[max(cached)] if cached else None
        if not online:
            out["lookup_error"] = out.get("lookup_error") or a.offline_version_error(repo_id, int(version))
    if not out["present"] or variant_path is None or snap is None:
        return out
    if e.get("store_receipt"):  # the build machine's cache held kernels' receipt: kernels' writer copies it
        a.store_signature_receipt(repo_id, commit, variant)
    variants = a.list_local(snap / "build")
    trace = a.resolve(variants, target.system() if target is not None else None)
    accepted = [d for d in trace if d.accepted]
    out["resolved"] = accepted[0].info.variant if accepted else None
    out["rejected"] = {d.info.variant: d.reason for d in trace if not d.accepted}
    calls: tuple[tuple[str, Callable[[], Check]], ...] = (
        ("digest", lambda: a.check_digest(variant_path)),
        ("signature", lambda: a.check_signature(variant_path, repo_id, commit)),
        ("receipt", lambda: a.signature_receipt(repo_id, commit, variant)))
    for key, fn in calls:
        try:
            got = fn()
            out[key] = {"status": got.status, "detail": got.detail}
        except Exception as exc:  # noqa: BLE001 - a validator that itself fails is a finding
            out[key] = {"status": "failed", "detail": f"{type(exc).__name__}: {exc}"}
    out["signed"] = (variant_path / "metadata.json.sigstore").is_file()
    deps = a.kernel_depends(variant_path / "metadata.json")
    out["depends"] = None if deps is None else [list(d) for d in deps]
    if online:
        trust = a.publisher_trust(repo_id)
        out["trust"] = {"status": trust.status, "detail": trust.detail}
        redirect = a.redirect(kernels_hub.hub_api(), repo_id, commit)
        out["redirect"] = {"status": redirect.status, "detail": redirect.detail}
    return out


def probe(request: dict[str, Any]) -> dict[str, Any]:
    from kernelcheck.core import environment
    from kernelcheck.integrations import kernels_hub
    from kernelcheck.integrations.kernels_api.validation import all_latest_set

    t = request.get("target")
    target = kernels_hub.HubSystem(**t) if t else None
    try:
        a = kernels_hub.api()
    except KernelsUnusable as exc:
        return {"kernels": environment.dist_version("kernels"), "unusable": str(exc), "entries": []}
    if request.get("receipts_only"):  # read-only: which of these variants this cache holds a signature receipt for
        return {"kernels": environment.dist_version("kernels"), "entries": [
            {**e, "receipt": a.signature_receipt(e["repo_id"], e["commit"], e["variant"]).status}
            for e in request["entries"]]}
    honours = a.honours_all_latest()
    entries = []
    for e in request["entries"]:
        try:
            entries.append(_entry(a, e, bool(request.get("online")), target))
        except LayoutError as exc:
            entries.append({"repo_id": e["repo_id"], "version": e.get("version"), "variant": e["variant"],
                            "present": False, "lookup_error": f"kernels layout: {exc}"})
    return {"kernels": environment.dist_version("kernels"), "generation": a.generation, "unusable": None,
            "all_latest": {"set": all_latest_set() if honours is None else honours,
                           "honoured": honours is not None}, "entries": entries}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    print(json.dumps(probe(request)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
